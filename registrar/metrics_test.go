package registrar

import (
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsExposition parses /metrics with Prometheus' own text parser and
// checks every family's type and values, including a label value that needs
// escaping.
func TestMetricsExposition(t *testing.T) {
	m := newMetrics()
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

	rec := httptest.NewRecorder()
	m.serve(rec, StageRejected)
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q, want the text exposition format 0.0.4", ct)
	}
	body := rec.Body.String()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("Prometheus' parser refuses /metrics: %v\n%s", err, body)
	}

	// value returns the sample of family name whose label (if any) is value.
	value := func(name string, typ dto.MetricType, label, labelValue string) float64 {
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
	checks := []struct {
		name         string
		typ          dto.MetricType
		label, value string
		want         float64
	}{
		{"csi_registrar_registration_stage", dto.MetricType_GAUGE, "stage", "kubelet rejected", 1},
		{"csi_registrar_registration_stage", dto.MetricType_GAUGE, "stage", "registered", 0},
		{"csi_registrar_registration_stage", dto.MetricType_GAUGE, "stage", "waiting for driver", 0},
		{"csi_registrar_kubelet_notifications_total", dto.MetricType_COUNTER, "outcome", "registered", 1},
		{"csi_registrar_kubelet_notifications_total", dto.MetricType_COUNTER, "outcome", "rejected", 2},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", "start", 1},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", "rejected", 2},
		{"csi_registrar_socket_creations_total", dto.MetricType_COUNTER, "reason", odd, 1},
		{"csi_registrar_getinfo_calls_total", dto.MetricType_COUNTER, "", "", 2},
		{"csi_registrar_driver_reachable", dto.MetricType_GAUGE, "", "", 1},
		{"csi_registrar_kubelet_retry", dto.MetricType_GAUGE, "mode", "itself", 1},
		{"csi_registrar_kubelet_retry", dto.MetricType_GAUGE, "mode", "never", 0},
		{"csi_registrar_kubelet_retry", dto.MetricType_GAUGE, "mode", "unknown", 0},
	}
	for _, c := range checks {
		if got := value(c.name, c.typ, c.label, c.value); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
	if n := len(families["csi_registrar_registration_stage"].GetMetric()); n != len(allStages) {
		t.Errorf("registration_stage has %d samples, want one per stage (%d)", n, len(allStages))
	}
	if len(families) != 6 {
		t.Errorf("%d families, want 6:\n%s", len(families), body)
	}
}

// TestMetricsBeforeAnyEvent: a fresh registrar lists both notification
// outcomes at 0 (so that rate() starts from 0) and no socket creation yet.
func TestMetricsBeforeAnyEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	newMetrics().serve(rec, StageStarting)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(families["csi_registrar_kubelet_notifications_total"].GetMetric()); n != 2 {
		t.Errorf("notifications_total has %d samples before any Notify, want 2 (registered, rejected) at 0", n)
	}
	if f, ok := families["csi_registrar_socket_creations_total"]; ok && len(f.GetMetric()) != 0 {
		t.Errorf("socket_creations_total has samples before any socket was created: %v", f.GetMetric())
	}
	if v := families["csi_registrar_registration_stage"].GetMetric()[0]; v.GetLabel()[0].GetValue() != StageStarting.String() || v.GetGauge().GetValue() != 1 {
		t.Errorf("first stage sample = %v, want %q 1", v, StageStarting)
	}
}
