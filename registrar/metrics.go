package registrar

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// metrics count what the registrar's Prometheus series report; write renders
// them, with the current stage, in the Prometheus text exposition format
// (version 0.0.4). Each Registrar has its own, so several can live in one
// process.
//
// Six series do not need a metrics library: github.com/prometheus/client_golang
// cost 0.8 MB of the shipped binary and about 1 ms of start-up (its package
// init registers Go and process collectors nobody here asked for). The tests
// check the output with Prometheus' own parser.
type metrics struct {
	mu              sync.Mutex
	registered      uint64            // NotifyRegistrationStatus(true) calls
	rejected        uint64            // NotifyRegistrationStatus(false) calls
	socketCreations map[string]uint64 // by reason: see state.go and socketfault.go
	getInfo         uint64
	driverReachable bool
	kubeletRetry    KubeletRetry
}

// The series, as /metrics names them.
const (
	metricRegistrationStage = "csi_registrar_registration_stage"
	metricNotifications     = "csi_registrar_kubelet_notifications_total"
	metricSocketCreations   = "csi_registrar_socket_creations_total"
	metricGetInfoCalls      = "csi_registrar_getinfo_calls_total"
	metricDriverReachable   = "csi_registrar_driver_reachable"
	metricKubeletRetry      = "csi_registrar_kubelet_retry"

	metricsContentType = "text/plain; version=0.0.4; charset=utf-8"
)

func newMetrics() *metrics {
	return &metrics{socketCreations: map[string]uint64{}}
}

func (m *metrics) setReachable(ok bool) {
	m.mu.Lock()
	m.driverReachable = ok
	m.mu.Unlock()
}

func (m *metrics) setKubeletRetry(k KubeletRetry) {
	m.mu.Lock()
	m.kubeletRetry = k
	m.mu.Unlock()
}

func (m *metrics) addGetInfo() {
	m.mu.Lock()
	m.getInfo++
	m.mu.Unlock()
}

func (m *metrics) addNotification(registered bool) {
	m.mu.Lock()
	if registered {
		m.registered++
	} else {
		m.rejected++
	}
	m.mu.Unlock()
}

func (m *metrics) addSocketCreation(reason string) {
	m.mu.Lock()
	m.socketCreations[reason]++
	m.mu.Unlock()
}

// serve writes every series in the text exposition format; stage is the
// registrar's current stage.
func (m *metrics) serve(w http.ResponseWriter, stage Stage) {
	w.Header().Set("Content-Type", metricsContentType)
	m.write(w, stage)
}

func (m *metrics) write(w io.Writer, stage Stage) {
	m.mu.Lock()
	getInfo, reachable, registered, rejected, retry := m.getInfo, m.driverReachable, m.registered, m.rejected, m.kubeletRetry
	creations := labelled(m.socketCreations)
	m.mu.Unlock()

	var b strings.Builder
	family(&b, metricRegistrationStage, "gauge", "1 for the registrar's current registration stage, 0 for the others.")
	for _, s := range allStages {
		sample(&b, metricRegistrationStage, "stage", s.String(), boolValue(s == stage))
	}
	family(&b, metricNotifications, "counter", "NotifyRegistrationStatus calls from the kubelet, by outcome (registered or rejected).")
	// Both outcomes are always listed, so that a rate() over them starts at 0.
	sample(&b, metricNotifications, "outcome", "registered", registered)
	sample(&b, metricNotifications, "outcome", "rejected", rejected)
	family(&b, metricSocketCreations, "counter", "Registration sockets created, by reason (start, deleted, rejected, kubelet-silent, no-notify, unresponsive; "+
		"after a listen fault: conflict, not-a-socket, permission, missing-directory, listen-error).")
	for _, l := range creations {
		sample(&b, metricSocketCreations, "reason", l.value, l.n)
	}
	family(&b, metricGetInfoCalls, "counter", "GetInfo calls from the kubelet's plugin watcher.")
	sample(&b, metricGetInfoCalls, "", "", getInfo)
	family(&b, metricDriverReachable, "gauge", "1 if the CSI driver answered its last Probe or GetPluginInfo, 0 otherwise.")
	sample(&b, metricDriverReachable, "", "", boolValue(reachable))
	family(&b, metricKubeletRetry, "gauge", "1 for what the registrar inferred about the kubelet's own retries after a rejection "+
		"(unknown; never: kubelet < 1.36, the socket is re-created; itself: kubelet >= 1.36, the socket is kept), 0 for the others.")
	for _, k := range allKubeletRetries {
		sample(&b, metricKubeletRetry, "mode", k.String(), boolValue(k == retry))
	}
	io.WriteString(w, b.String())
}

type labelCount struct {
	value string
	n     uint64
}

// labelled returns the counts sorted by label value, as Prometheus lists them.
func labelled(counts map[string]uint64) []labelCount {
	out := make([]labelCount, 0, len(counts))
	for v, n := range counts {
		out = append(out, labelCount{v, n})
	}
	slices.SortFunc(out, func(a, b labelCount) int { return strings.Compare(a.value, b.value) })
	return out
}

func family(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, helpEscaper.Replace(help), name, typ)
}

func sample(b *strings.Builder, name, label, value string, n uint64) {
	b.WriteString(name)
	if label != "" {
		fmt.Fprintf(b, "{%s=\"%s\"}", label, labelEscaper.Replace(value))
	}
	b.WriteByte(' ')
	b.WriteString(strconv.FormatUint(n, 10))
	b.WriteByte('\n')
}

func boolValue(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// The text format escapes backslash and newline in HELP, and also the double
// quote in label values.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)
