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

// TestRollingUpdateAuto: rollingUpdate.enabled=auto (the default) turns the
// mode on for an API server of 1.34 to 1.37 (with a provider's suffix too),
// off below and above; true and false decide whatever the version; any
// other value fails naming it and the three choices.
func TestRollingUpdateAuto(t *testing.T) {
	for _, tc := range []struct {
		enabled any // nil: the default
		kube    string
		want    bool
	}{
		{nil, "1.33.9", false},
		{nil, "1.34.0", true},
		{nil, "1.35.8", true},
		{nil, "1.37.2", true},
		{nil, "1.37.2-gke.1200", true},
		{nil, "1.38.0", false},
		{nil, "1.38.0-alpha.0", false},
		{"auto", "1.36.4", true},
		{true, "1.33.0", true},
		{"true", "1.38.0", true},
		{false, "1.37.2", false},
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
			t.Errorf("enabled=%v, API server %s: mode %v, want %v", tc.enabled, tc.kube, got, tc.want)
		}
	}
	_, err := renderChartOn(map[string]any{"rollingUpdate": map[string]any{"enabled": "yes"}}, "1.37.2")
	if err == nil || !strings.Contains(err.Error(), `"yes" is not one of auto, true, false`) {
		t.Errorf("enabled=yes: %v, want an error naming the value and the choices", err)
	}
}
