package manifests

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// apiServer is helm's default capabilities with the API server at version
// kube ("1.37.2"): what `helm install` reads from the cluster, or `helm
// template --kube-version` is told (helm template's own default is 1.20).
func apiServer(kube string) *chartutil.Capabilities {
	c := *chartutil.DefaultCapabilities
	parts := strings.SplitN(kube, ".", 3)
	c.KubeVersion = chartutil.KubeVersion{Version: "v" + kube, Major: parts[0], Minor: parts[1]}
	return &c
}

// TestRollingUpdateEnabled: rollingUpdate.enabled is an explicit choice:
// true (the default) turns the rolling update on and false off, whatever
// the API server's version; auto, the earlier chart's choice by that
// version, and any other value fail naming the value and the choices.
func TestRollingUpdateEnabled(t *testing.T) {
	for _, tc := range []struct {
		enabled any // nil: the default
		kube    string
		want    bool
	}{
		{nil, "1.33.9", true},
		{nil, "1.37.2", true},
		{nil, "1.38.0", true},
		{true, "1.33.0", true},
		{"true", "1.38.0", true},
		{false, "1.37.2", false},
		{"false", "1.34.0", false},
	} {
		set := map[string]any{}
		if tc.enabled != nil {
			set["rollingUpdate"] = map[string]any{"enabled": tc.enabled}
		}
		docs, err := renderChartOn(set, tc.kube)
		if err != nil {
			t.Errorf("enabled=%v on %s: %v", tc.enabled, tc.kube, err)
			continue
		}
		got := strings.Contains(strings.Join(docs, "\n"), "--rolling-update=$(POD_UID)")
		if got != tc.want {
			t.Errorf("enabled=%v, API server %s: rolling update %v, want %v", tc.enabled, tc.kube, got, tc.want)
		}
	}
	for v, want := range map[string]string{
		"auto": "auto is no longer a choice",
		"yes":  `"yes" is not one of true, false`,
	} {
		_, err := renderChartOn(map[string]any{"rollingUpdate": map[string]any{"enabled": v}}, "1.37.2")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("enabled=%s: %v, want an error containing %q", v, err, want)
		}
	}
}
