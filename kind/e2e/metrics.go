//go:build e2e || bench

package e2e

import (
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a parsed Prometheus text exposition: "name{labels}" -> value,
// the key as the exposition prints it (labels sorted by name, values
// quoted and escaped as the text format escapes them). A histogram or
// summary gives its _sum and _count series, and one series per bucket
// (le) or quantile.
type Metrics map[string]float64

// Get returns the value of a series (0 when absent, as for a counter that
// has not been incremented yet).
func (m Metrics) Get(series string) float64 { return m[series] }

// ParseMetrics parses the Prometheus text format with the Prometheus
// library's parser (expfmt), as internal/clusterstatus reads the kubelet's.
func ParseMetrics(text string) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m := Metrics{}
	for name, f := range families {
		for _, mt := range f.GetMetric() {
			labels := mt.GetLabel()
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				m[seriesKey(name, labels)] = mt.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				m[seriesKey(name, labels)] = mt.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				m[seriesKey(name, labels)] = mt.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := mt.GetHistogram()
				m[seriesKey(name+"_sum", labels)] = h.GetSampleSum()
				m[seriesKey(name+"_count", labels)] = float64(h.GetSampleCount())
				for _, b := range h.GetBucket() {
					m[seriesKey(name+"_bucket", labels, "le", fmt.Sprint(b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
			case dto.MetricType_SUMMARY:
				s := mt.GetSummary()
				m[seriesKey(name+"_sum", labels)] = s.GetSampleSum()
				m[seriesKey(name+"_count", labels)] = float64(s.GetSampleCount())
				for _, q := range s.GetQuantile() {
					m[seriesKey(name, labels, "quantile", fmt.Sprint(q.GetQuantile()))] = q.GetValue()
				}
			}
		}
	}
	return m, nil
}

// Series names of the registrar's /metrics.
const (
	MetricGetInfo    = "csi_registrar_getinfo_calls_total"
	MetricRegistered = `csi_registrar_kubelet_notifications_total{outcome="registered"}`
	MetricRejected   = `csi_registrar_kubelet_notifications_total{outcome="rejected"}`
)

// MetricSocketCreations is the series of socket creations for one reason.
func MetricSocketCreations(reason string) string {
	return fmt.Sprintf("csi_registrar_socket_creations_total{reason=%q}", reason)
}

// SocketCreations sums socket creations over every reason.
func (m Metrics) SocketCreations() float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "csi_registrar_socket_creations_total{") {
			n += v
		}
	}
	return n
}

// seriesKey is name{labels} with the labels sorted by name, plus one extra
// label (name, value) when given.
func seriesKey(name string, labels []*dto.LabelPair, extra ...string) string {
	type pair struct{ name, value string }
	pairs := make([]pair, 0, len(labels)+1)
	for _, l := range labels {
		pairs = append(pairs, pair{l.GetName(), l.GetValue()})
	}
	if len(extra) == 2 {
		pairs = append(pairs, pair{extra[0], extra[1]})
	}
	if len(pairs) == 0 {
		return name
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].name < pairs[j].name })
	escape := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`) // as the text format escapes a label value
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.name + `="` + escape.Replace(p.value) + `"`
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}
