package kubeletplugins_test

import (
	"os"
	"path"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
)

// sample is a kubelet's whole /metrics text, read on the local node
// (kind/localnode, kubelet v1.37.2) on 2026-11-27 at commit 67de0ba from
// the kubelet's port, after `make demo` and 10 rollouts of manifests/
// (kubectl -n csi-registrar rollout restart daemonset/csi-stub-node, then
// rollout status), and a dead socket dead.csi.example.com-reg.sock bound
// and closed in plugins_registry 8 s before.
const sample = "testdata/kubelet-1.37.2-metrics.txt"

const (
	stub = "stub.csi.example.com"
	dead = "dead.csi.example.com"
	dir  = "/var/lib/kubelet/plugins_registry/"
)

func readSample(t *testing.T) kubeletplugins.State {
	t.Helper()
	b, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kubeletplugins.Parse(b)
	if err != nil {
		t.Fatalf("the kubelet's own /metrics: %v", err)
	}
	return st
}

// TestRealKubeletSample: after 10 rollouts the kubelet holds 21 paths of
// the driver in both states (the live one and 20 retired: two per rollout,
// and one of the rollout `make demo` does), none desired only; the dead
// socket is in the desired state only.
func TestRealKubeletSample(t *testing.T) {
	st := readSample(t)
	if len(st) != 22 {
		t.Errorf("paths: got %d, want 22 (21 of %s, 1 dead)", len(st), stub)
	}
	v := st.Driver(stub)
	if len(v.Actual) != 21 || len(v.DesiredOnly) != 0 || len(v.ActualOnly) != 0 {
		t.Fatalf("%s: %d actual, %d desired only, %d actual only; want 21, 0, 0", stub, len(v.Actual), len(v.DesiredOnly), len(v.ActualOnly))
	}
	latest := v.Latest(stub)
	if want := dir + stub + "_8192c3a4_1795739960818-reg.sock"; latest != want {
		t.Errorf("latest: got %s, want %s (the socket left on disk)", latest, want)
	}
	if r := v.Retired(latest); r != 20 {
		t.Errorf("retired: got %d, want 20", r)
	}
	if s := v.Summary(stub, ""); !strings.Contains(s, "21 registration path(s) in its actual state (live: "+path.Base(latest)+"; retired: 20)") {
		t.Errorf("summary: %s", s)
	}
	d := st.Driver(dead)
	if len(d.Actual) != 0 || len(d.DesiredOnly) != 1 || d.DesiredOnly[0] != dir+dead+"-reg.sock" {
		t.Errorf("%s: %+v, want desired only", dead, d)
	}
	if s := d.Summary(dead, ""); !strings.Contains(s, "no registration path of the driver in its actual state") ||
		!strings.Contains(s, "1 dialed and never registered (desired state only): "+dead+"-reg.sock") {
		t.Errorf("summary: %s", s)
	}
	if o := st.Driver("other.csi.example.com"); len(o.Actual)+len(o.DesiredOnly) != 0 {
		t.Errorf("another driver gets paths: %+v", o)
	}
}

func TestPathOwnership(t *testing.T) {
	for _, tc := range []struct {
		sock string
		want bool
	}{
		{dir + stub + "-reg.sock", true},
		{dir + stub + "_8192c3a4_1795739960818-reg.sock", true},
		{"/var/lib/kubelet/plugins/" + stub + "/csi.sock", true},
		{dir + "x" + stub + "-reg.sock", false},
		{dir + stub + ".other_8192c3a4_1-reg.sock", false},
		{dir + stub + "_8192c3a_1-reg.sock", false}, // instance too short
	} {
		if got := kubeletplugins.IsDriverPath(stub, tc.sock); got != tc.want {
			t.Errorf("IsDriverPath(%s): got %v, want %v", tc.sock, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	st, err := kubeletplugins.Parse([]byte("# a kubelet with no plugin\nkubelet_running_pods 3\n"))
	if err != nil || len(st) != 0 {
		t.Errorf("no series: %v %v, want empty", st, err)
	}
	if _, err := kubeletplugins.Parse([]byte("plugin_manager_total_plugins{socket_path=\"/x\",state=\"desired_state_of_world\"} oops\n")); err == nil {
		t.Error("a text that does not parse: no error")
	}
	_, err = kubeletplugins.Parse([]byte("plugin_manager_total_plugins{socket_path=\"/x\",state=\"future_state\"} 1\n"))
	if err == nil || !strings.Contains(err.Error(), `state "future_state"`) {
		t.Errorf("an unknown state: %v, want an error naming it", err)
	}
	st, err = kubeletplugins.Parse([]byte("plugin_manager_total_plugins{socket_path=\"/x\",state=\"desired_state_of_world\"} 0\n"))
	if err != nil || len(st) != 0 {
		t.Errorf("a zero gauge: %v %v, want nothing held", st, err)
	}
}
