package doctor_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// kubeletSample is the kubelet's /metrics read on the local node after 10
// rollouts of manifests/ and a dead socket (internal/kubeletplugins's
// testdata; how it was captured is told there).
const kubeletSample = "../kubeletplugins/testdata/kubelet-1.37.2-metrics.txt"

// TestKubeletSample: the real kubelet's metric, saved to a file: the 20
// retired paths of the driver are a note with the advice, the dead socket
// the kubelet redials (its file gone) a warning.
func TestKubeletSample(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	o := n.opts()
	o.KubeletMetrics = kubeletSample
	r := n.run(t, o)
	wantFinding(t, r, doctor.SeverityInfo, "stub.csi.example.com",
		"21 registration path(s) in its actual state", "retired: 20", "until it restarts")
	f := wantFinding(t, r, doctor.SeverityWarning, "/var/lib/kubelet/plugins_registry/dead.csi.example.com-reg.sock",
		"dialed this path and never registered it", "gone from disk", "redials it every ~2 minutes")
	if !strings.Contains(f.Fix, "kubelet restart") {
		t.Errorf("fix: %s", f.Fix)
	}
	if r.Kubelet == nil || r.Kubelet.Source != kubeletSample || len(r.Kubelet.Drivers["stub.csi.example.com"].Actual) != 21 {
		t.Fatalf("kubelet state: %+v", r.Kubelet)
	}
	var out strings.Builder
	if err := doctor.WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KUBELET DRIVER", "stub.csi.example.com  21", "stub.csi.example.com_8192c3a4_1795739960818-reg.sock"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
}

// metricsOf is a /metrics text in which the kubelet holds paths in states.
func metricsOf(series map[string][]string) string {
	var b strings.Builder
	b.WriteString("# HELP plugin_manager_total_plugins [ALPHA] Number of plugins in Plugin Manager\n# TYPE plugin_manager_total_plugins gauge\n")
	for sock, states := range series {
		for _, st := range states {
			fmt.Fprintf(&b, "plugin_manager_total_plugins{socket_path=%q,state=%q} 1\n", sock, st)
		}
	}
	return b.String()
}

// TestKubeletThroughProxy: the metric read through the API server's node
// proxy, beside a live instance of the previous release's rolling-update
// mode the kubelet confirmed: the kubelet holding its path and one retired
// is a note; holding none of the driver's paths is what the mode does not
// expect: a warning.
func TestKubeletThroughProxy(t *testing.T) {
	n := newNode(t)
	// An instance of the previous release's mode (this release announces
	// no more), which the upgrade from it meets.
	drv := n.serveDriver(t, "roll", &driver{name: rolled, nodeID: "node-1"})
	now := time.Now().UnixMilli()
	sock := n.fakeInstance(t, drv, "pod-a", registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000}, true)
	api := newFakeAPIServer(t, "node-1")
	api.registered(rolled, "node-1")
	o := n.opts()
	o.Kubeconfig = api.kubeconfig(t, t.TempDir(), "token: good-token")

	retired := filepath.Join(n.registry, csiplugin.RollingUpdateSocketName(rolled, csiplugin.InstanceID("pod-old"), 5))
	api.mu.Lock()
	api.metrics = metricsOf(map[string][]string{
		sock:    {"actual_state_of_world", "desired_state_of_world"},
		retired: {"actual_state_of_world", "desired_state_of_world"},
	})
	api.mu.Unlock()
	r := n.run(t, o)
	f := wantFinding(t, r, doctor.SeverityInfo, rolled, "2 registration path(s) in its actual state (live: "+filepath.Base(sock)+"; retired: 1)")
	if !strings.Contains(f.Fix, "docs/performance.md") {
		t.Errorf("fix: %s", f.Fix)
	}
	if !r.Healthy() {
		t.Errorf("one retired path is not a fault:\n%s", dump(r))
	}

	api.mu.Lock()
	api.metrics = metricsOf(nil)
	api.mu.Unlock()
	r = n.run(t, o)
	wantFinding(t, r, doctor.SeverityWarning, rolled, "the kubelet holds no registration path of the driver while a rolling-update instance serves",
		"which the mode does not expect")
}

// TestKubeletForbidden: without `get nodes/proxy` the rest of the
// diagnosis stands, and a note names the permission and the other way.
func TestKubeletForbidden(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	api := registeredDriver(t, n, "a.csi.example.com")
	api.metricsStatus = http.StatusForbidden
	o := n.opts()
	o.Kubeconfig = api.kubeconfig(t, t.TempDir(), "token: good-token")
	r := n.run(t, o)
	f := wantFinding(t, r, doctor.SeverityInfo, "kubelet node-1", "refused `get nodes/proxy`", "403")
	if !strings.Contains(f.Fix, "--kubelet-metrics FILE") {
		t.Errorf("fix: %s", f.Fix)
	}
	if !r.Healthy() || len(r.Findings) != 1 {
		t.Errorf("want healthy with one note:\n%s", dump(r))
	}
	if r.Kubelet == nil || !strings.Contains(r.Kubelet.Error, "403") {
		t.Errorf("kubelet state: %+v", r.Kubelet)
	}
}

// TestKubeletMetricsFileBad: a --kubelet-metrics file that cannot be read
// or does not parse is bad input, named with the fix.
func TestKubeletMetricsFileBad(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	for name, path := range map[string]string{
		"missing":     filepath.Join(n.dir, "nothing.txt"),
		"not metrics": writeFile(t, n.dir, "bad.txt", "plugin_manager_total_plugins{socket_path=\"/x\"} not-a-number\n"),
	} {
		o := n.opts()
		o.KubeletMetrics = path
		_, err := doctor.Run(context.Background(), o)
		var ve *csiplugin.ValidationError
		if !errors.As(err, &ve) || ve.Value != path || !strings.Contains(ve.Fix, "/proxy/metrics") {
			t.Errorf("%s: %v, want a validation error naming %s", name, err, path)
		}
	}
}
