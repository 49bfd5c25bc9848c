package registrar

import (
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves /metrics from m at stage and parses it with Prometheus' own
// text parser; it fails the test unless promlint finds nothing to complain of.
func scrape(t *testing.T, m *metrics, stage Stage) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.serve(rec, stage)
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q, want the text exposition format 0.0.4", ct)
	}
	body := rec.Body.String()
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint cannot read /metrics: %v\n%s", err, body)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus' parser refuses /metrics: %v\n%s", err, body)
	}
	return families, body
}

// value returns the sample of family name whose label (if any) is
// labelValue, checking the family's type and HELP.
func value(t *testing.T, families map[string]*dto.MetricFamily, body, name string, typ dto.MetricType, label, labelValue string) float64 {
	t.Helper()
	f, ok := families[name]
	if !ok {
		t.Fatalf("no family %s in:\n%s", name, body)
	}
	if f.GetType() != typ {
		t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
	}
	if f.GetHelp() == "" {
		t.Errorf("%s has no HELP", name)
	}
	for _, s := range f.GetMetric() {
		if label == "" && len(s.GetLabel()) == 0 ||
			len(s.GetLabel()) == 1 && s.GetLabel()[0].GetName() == label && s.GetLabel()[0].GetValue() == labelValue {
			if typ == dto.MetricType_COUNTER {
				return s.GetCounter().GetValue()
			}
			return s.GetGauge().GetValue()
		}
	}
	t.Fatalf("no sample %s{%s=%q} in:\n%s", name, label, labelValue, body)
	return 0
}

// TestMetricsExposition parses /metrics with Prometheus' own text parser and
// linter and checks every registrar family's type and values, including a
// label value that needs escaping.
func TestMetricsExposition(t *testing.T) {
	m := newMetrics("v1.2.3")
	m.setReachable(true)
	m.addGetInfo()
	m.addGetInfo()
	m.addNotification(true)
	m.addNotification(false)
	m.addNotification(false)
	m.addSocketCreation("start")
	m.addSocketCreation("rejected")
	m.addSocketCreation("rejected")
	const odd = "a \"quoted\" \\ reason\nwith a newline"
	m.addSocketCreation(odd)
	m.setKubeletRetry(KubeletRetryItself)

	families, body := scrape(t, m, StageRejected)
	checks := []struct {
		name         string
		typ          dto.MetricType
		label, value string
		want         float64
	}{
		{"csi_registrar_registration_stage", dto.MetricType_GAUGE, "stage", "kubelet_rejected", 1},
		{"csi_registrar_registration_stage", dto.MetricType_GAUGE, "stage", "registered", 0},
		{"csi_registrar_registration_stage", dto.MetricType_GAUGE, "stage", "waiting_for_driver", 0},
		{"csi_registrar_kubelet_notifications_total", dto.MetricType_COUNTER, "outcome", "registered", 1},
		{"csi_registrar_kubelet_notifications_total", dto.MetricType_COUNTER, "outcome", "rejected", 2},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", "start", 1},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", "rejected", 2},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", "deleted", 0},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", labelValue(odd), 1},
		{"csi_registrar_getinfo_calls_total", dto.MetricType_COUNTER, "", "", 2},
		{"csi_registrar_driver_reachable", dto.MetricType_GAUGE, "", "", 1},
		{"csi_registrar_kubelet_retry", dto.MetricType_GAUGE, "mode", "itself", 1},
		{"csi_registrar_kubelet_retry", dto.MetricType_GAUGE, "mode", "never", 0},
		{"csi_registrar_kubelet_retry", dto.MetricType_GAUGE, "mode", "unknown", 0},
	}
	for _, c := range checks {
		if got := value(t, families, body, c.name, c.typ, c.label, c.value); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
	if n := len(families["csi_registrar_registration_stage"].GetMetric()); n != len(allStages) {
		t.Errorf("registration_stage has %d samples, want one per stage (%d)", n, len(allStages))
	}
	// 7 csi_registrar_* families, 4 process_*, go_goroutines.
	if len(families) != 12 {
		t.Errorf("%d families, want 12:\n%s", len(families), body)
	}
}

// TestMetricsLabelValues: stage and reason label values are lower case
// words joined by '_', whatever the stages' String() is.
func TestMetricsLabelValues(t *testing.T) {
	for in, want := range map[string]string{
		"waiting for driver": "waiting_for_driver",
		"Kubelet  Rejected":  "kubelet_rejected",
		"kubelet-silent":     "kubelet-silent",
		"registered":         "registered",
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
	families, _ := scrape(t, newMetrics(""), StageWaitingForDriver)
	clean := regexp.MustCompile(`^[a-z0-9_-]+$`)
	seen := map[string]bool{}
	for _, name := range []string{"csi_registrar_registration_stage", "csi_registrar_socket_creations_total"} {
		for _, s := range families[name].GetMetric() {
			v := s.GetLabel()[0].GetValue()
			seen[v] = true
			if !clean.MatchString(v) {
				t.Errorf("%s label value %q has characters other than [a-z0-9_-]", name, v)
			}
		}
	}
	if !seen["waiting_for_driver"] || !seen["waiting_for_kubelet"] || !seen["socket_conflict"] {
		t.Errorf("stage values: %v", seen)
	}
}

// TestMetricsBeforeAnyEvent: a fresh registrar lists both notification
// outcomes and every socket creation reason at 0, so that rate() and
// increase() start from the first scrape.
func TestMetricsBeforeAnyEvent(t *testing.T) {
	families, body := scrape(t, newMetrics(""), StageStarting)
	if n := len(families["csi_registrar_kubelet_notifications_total"].GetMetric()); n != 2 {
		t.Errorf("notifications_total has %d samples before any Notify, want 2 (registered, rejected) at 0", n)
	}
	creations := families["csi_registrar_socket_creations_total"].GetMetric()
	if len(creations) != len(socketCreationReasons) {
		t.Errorf("socket_creations_total has %d samples, want one per reason %v:\n%s", len(creations), socketCreationReasons, body)
	}
	for _, r := range socketCreationReasons {
		if v := value(t, families, body, "csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", r); v != 0 {
			t.Errorf("reason %q = %v before any socket, want 0", r, v)
		}
	}
	if v := families["csi_registrar_registration_stage"].GetMetric()[0]; v.GetLabel()[0].GetValue() != "starting" || v.GetGauge().GetValue() != 1 {
		t.Errorf("first stage sample = %v, want starting 1", v)
	}
}

// TestBuildInfo: csi_registrar_build_info is 1 with the version given and
// the Go version; without one, the build information's or "unknown".
func TestBuildInfo(t *testing.T) {
	for given, want := range map[string]string{"v1.2.3": "v1.2.3", "": buildVersion("")} {
		families, body := scrape(t, newMetrics(given), StageStarting)
		f := families["csi_registrar_build_info"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("want one build_info sample:\n%s", body)
		}
		s := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if f.GetType() != dto.MetricType_GAUGE || s.GetGauge().GetValue() != 1 ||
			labels["version"] != want || labels["goversion"] != runtime.Version() || len(labels) != 2 {
			t.Errorf("build_info for version %q: %v %v", given, labels, s.GetGauge().GetValue())
		}
	}
	if buildVersion("") == "" {
		t.Error("empty version without Options.Version")
	}
}

// TestProcessMetrics: the process and Go series have the values the kernel
// and the runtime report by other means.
func TestProcessMetrics(t *testing.T) {
	get := func(name string, typ dto.MetricType) float64 {
		t.Helper()
		families, body := scrape(t, newMetrics(""), StageStarting)
		return value(t, families, body, name, typ, "", "")
	}

	// Open descriptors: three more files, three more.
	before := get("process_open_fds", dto.MetricType_GAUGE)
	var files []*os.File
	for range 3 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if got := get("process_open_fds", dto.MetricType_GAUGE); got != before+3 {
		t.Errorf("process_open_fds = %v after opening 3 files, want %v", got, before+3)
	}
	for _, f := range files {
		f.Close()
	}

	// Goroutines: ten more parked ones are counted.
	stop := make(chan struct{})
	base := runtime.NumGoroutine()
	for range 10 {
		go func() { <-stop }()
	}
	if got := get("go_goroutines", dto.MetricType_GAUGE); got < float64(base+10) {
		t.Errorf("go_goroutines = %v with %d goroutines running", got, base+10)
	}
	close(stop)

	// CPU time: within two clock ticks of what getrusage reports.
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	cpu := get("process_cpu_seconds_total", dto.MetricType_COUNTER)
	var ru2 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru2)
	secs := func(r syscall.Rusage) float64 {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano()).Seconds()
	}
	if cpu < secs(ru)-2.0/userHZ || cpu > secs(ru2)+2.0/userHZ {
		t.Errorf("process_cpu_seconds_total = %v, getrusage says %v to %v", cpu, secs(ru), secs(ru2))
	}

	// Resident memory: at least the heap the runtime has in use, at most
	// the peak resident size (VmHWM) the kernel reports.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss := get("process_resident_memory_bytes", dto.MetricType_GAUGE)
	if rss < float64(ms.HeapInuse)/2 || rss > float64(ru2.Maxrss)*1024*2 {
		t.Errorf("process_resident_memory_bytes = %v; heap in use %d, peak RSS %d KiB", rss, ms.HeapInuse, ru2.Maxrss)
	}

	// Start time: after boot, not in the future, and the same on every scrape.
	start := get("process_start_time_seconds", dto.MetricType_GAUGE)
	boot, err := bootTime()
	if err != nil {
		t.Fatal(err)
	}
	if now := float64(time.Now().Unix()); start < float64(boot) || start > now+1 {
		t.Errorf("process_start_time_seconds = %v, boot %d, now %v", start, boot, now)
	}
	if again := get("process_start_time_seconds", dto.MetricType_GAUGE); again != start {
		t.Errorf("process_start_time_seconds moved from %v to %v", start, again)
	}
}

// TestMetricsEndpointAndWriteMetrics: a Registrar's /metrics serves its
// series with the process and Go ones, and WriteMetrics writes its series
// alone, the same as /metrics has them.
func TestMetricsEndpointAndWriteMetrics(t *testing.T) {
	r, err := New(Options{KubeletRegistrationPath: "/var/lib/kubelet/plugins/x/csi.sock", Version: "v9.8.7"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	served := rec.Body.String()
	var own strings.Builder
	if err := r.WriteMetrics(&own); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(served, own.String()) {
		t.Errorf("/metrics does not start with what WriteMetrics writes:\n%s\n---\n%s", served, own.String())
	}
	for _, want := range []string{`csi_registrar_build_info{version="v9.8.7",goversion="` + runtime.Version() + `"} 1`,
		"\nprocess_open_fds ", "\nprocess_resident_memory_bytes ", "\nprocess_cpu_seconds_total ",
		"\nprocess_start_time_seconds ", "\ngo_goroutines "} {
		if !strings.Contains(served, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, served)
		}
	}
	if strings.Contains(own.String(), "process_") || strings.Contains(own.String(), "go_goroutines") {
		t.Errorf("WriteMetrics writes process or Go series:\n%s", own.String())
	}
	problems, err := promlint.New(strings.NewReader(own.String())).Lint()
	if err != nil || len(problems) != 0 {
		t.Errorf("promlint on WriteMetrics: %v %v", err, problems)
	}
}
