package registrar

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// metrics count what the registrar's Prometheus series report; write renders
// them, with the current stage, in the Prometheus text exposition format
// (version 0.0.4). Each Registrar has its own, so several can live in one
// process.
//
// These few series do not need a metrics library: github.com/prometheus/client_golang
// cost 0.8 MB of the shipped binary and about 1 ms of start-up (its package
// init registers Go and process collectors nobody here asked for). The tests
// check the output with Prometheus' own parser and linter.
type metrics struct {
	mu              sync.Mutex
	registered      uint64            // NotifyRegistrationStatus(true) calls
	rejected        uint64            // NotifyRegistrationStatus(false) calls
	socketCreations map[string]uint64 // by reason (label value), every one of socketCreationReasons from the start
	getInfo         uint64
	driverReachable bool
	version         string // the build_info label; set once by newMetrics
	kubeletRetry    KubeletRetry
	proc            processStatsCache // for /metrics only
}

// socketCreationReasons are the reasons the control loop passes to
// addSocketCreation. Every one is listed from the start, at 0, so that a
// rate() or increase() over a reason starts at the first scrape, not at the
// first event. A reason not listed here is still counted, from its first use.
var socketCreationReasons = []string{
	reasonStart, reasonDeleted, reasonRejected, reasonKubeletSilent, reasonNoNotify, reasonUnresponsive, reasonOtherRemoved,
	string(sockfile.KindInUse), string(sockfile.KindNotSocket), string(sockfile.KindPermission),
	string(sockfile.KindMissingDirectory), string(sockfile.KindOther),
}

// The series, as /metrics names them.
const (
	metricRegistrationStage = "csi_registrar_registration_stage"
	metricNotifications     = "csi_registrar_kubelet_notifications_total"
	metricSocketCreations   = "csi_registrar_socket_creations_total"
	metricGetInfoCalls      = "csi_registrar_getinfo_calls_total"
	metricDriverReachable   = "csi_registrar_driver_reachable"
	metricBuildInfo         = "csi_registrar_build_info"
	metricKubeletRetry      = "csi_registrar_kubelet_retry"

	metricsContentType = "text/plain; version=0.0.4; charset=utf-8"
)

// newMetrics returns the metrics of a registrar of the given version (see
// buildVersion for an empty one).
func newMetrics(version string) *metrics {
	m := &metrics{socketCreations: map[string]uint64{}, version: buildVersion(version)}
	for _, r := range socketCreationReasons {
		m.socketCreations[labelValue(r)] = 0
	}
	return m
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
	m.socketCreations[labelValue(reason)]++
	m.mu.Unlock()
}

// labelValue is the form of a stage or reason as a Prometheus label value:
// lower case, words joined by '_' ("waiting for driver" → "waiting_for_driver"),
// so that it needs no quoting in PromQL selectors or dashboards. It applies to
// whatever String() a Stage has.
func labelValue(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), "_")
}

// WriteMetrics writes the registrar's own series (csi_registrar_*) in the
// Prometheus text exposition format, version 0.0.4. A program that embeds the
// registrar and has its own metrics registry adds them to it from here, e.g.
// with client_golang as a prometheus.GathererFunc that parses this output
// with expfmt (see the example). The process_* and go_* series that
// /metrics serves as well are left out: such a program exports its own.
func (r *Registrar) WriteMetrics(w io.Writer) error {
	_, err := io.WriteString(w, r.metrics.text(r.Status().Stage))
	return err
}

// serve answers /metrics: the registrar's series, then those of the process
// and the Go runtime; stage is the registrar's current stage.
func (m *metrics) serve(w http.ResponseWriter, stage Stage) {
	w.Header().Set("Content-Type", metricsContentType)
	var b strings.Builder
	b.WriteString(m.text(stage))
	writeProcessMetrics(&b, &m.proc)
	io.WriteString(w, b.String())
}

// buildVersion is v (Options.Version), else the main module's version as
// the Go toolchain recorded it, else "unknown".
func buildVersion(v string) string {
	if v != "" {
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// text renders the registrar's series; stage is its current stage.
func (m *metrics) text(stage Stage) string {
	m.mu.Lock()
	getInfo, reachable, registered, rejected, retry := m.getInfo, m.driverReachable, m.registered, m.rejected, m.kubeletRetry
	creations := labelled(m.socketCreations)
	m.mu.Unlock()

	var b strings.Builder
	family(&b, metricBuildInfo, "gauge", "Always 1; the labels are the registrar's version and the Go version it was built with.")
	fmt.Fprintf(&b, "%s{version=\"%s\",goversion=\"%s\"} 1\n", metricBuildInfo, labelEscaper.Replace(m.version), labelEscaper.Replace(runtime.Version()))
	family(&b, metricRegistrationStage, "gauge", "1 for the registrar's current registration stage, 0 for the others.")
	for _, s := range allStages {
		sample(&b, metricRegistrationStage, "stage", labelValue(s.String()), boolValue(s == stage))
	}
	family(&b, metricNotifications, "counter", "NotifyRegistrationStatus calls from the kubelet, by outcome (registered or rejected).")
	// Both outcomes are always listed, so that a rate() over them starts at 0.
	sample(&b, metricNotifications, "outcome", "registered", registered)
	sample(&b, metricNotifications, "outcome", "rejected", rejected)
	family(&b, metricSocketCreations, "counter", "Registration sockets created, by reason ("+strings.Join(socketCreationReasons, ", ")+").")
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
	return b.String()
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
