package clusterstatus

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// kubeletSample is the kubelet's /metrics read on the local node after 10
// rollouts of manifests/ (internal/kubeletplugins's testdata; how it was
// captured is told there): 21 registration paths of stub.csi.example.com.
const kubeletSample = "../kubeletplugins/testdata/kubelet-1.37.2-metrics.txt"

// fakeNodeProxy is a fake of the API server's node proxy (a real HTTP
// server that client-go talks to): per node, a kubelet /metrics text or a
// status code the API server answers instead.
type fakeNodeProxy struct {
	metrics map[string]string
	status  map[string]int
	refused map[string]string // a text the API server answers with 400 (as for a node address it does not proxy to)
	mu      sync.Mutex
	calls   int
}

// client returns a clientset of an API server that is f, served until the
// end of the test.
func (f *fakeNodeProxy) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func (f *fakeNodeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	node, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
	node, ok2 := strings.CutSuffix(node, "/proxy/metrics")
	if code := f.status[node]; ok && ok2 && code != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":%d,`+
			`"message":"nodes \"%s\" is forbidden: User \"viewer\" cannot get resource \"nodes/proxy\""}`, code, node)
		return
	}
	if msg := f.refused[node]; ok && ok2 && msg != "" {
		// The API server's own Status, which DoRaw does not decode.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":"BadRequest","code":400}`, msg)
		return
	}
	text, found := f.metrics[node]
	if !ok || !ok2 || !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, text)
}

// TestKubeletState: three nodes of a DaemonSet in the rolling-update mode,
// all registered as the API objects show. node-1's kubelet holds the 21
// paths of the real sample (20 retired); node-2's holds none of the
// driver's while its pod is ready, and redials a dead announcement: what
// the mode does not expect; node-3's metric is forbidden: one unknown line
// naming the permission. Without --kubelet-state, no proxy call.
func TestKubeletState(t *testing.T) {
	sample, err := os.ReadFile(kubeletSample)
	if err != nil {
		t.Fatal(err)
	}
	dead := "/var/lib/kubelet/plugins_registry/" + stub + "_0cdb0d8c_1795739868663-reg.sock"
	proxy := &fakeNodeProxy{
		metrics: map[string]string{
			"node-1": string(sample),
			"node-2": "# TYPE plugin_manager_total_plugins gauge\n" +
				"plugin_manager_total_plugins{socket_path=\"" + dead + "\",state=\"desired_state_of_world\"} 1\n" +
				"plugin_manager_total_plugins{socket_path=\"/var/lib/kubelet/plugins_registry/" + stub + "_8192c3a4_1795739960818-reg.sock\",state=\"desired_state_of_world\"} 1\n",
		},
		status: map[string]int{"node-3": http.StatusForbidden},
	}
	client := proxy.client(t)

	linux := map[string]string{"kubernetes.io/os": "linux"}
	ds := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub, "--rolling-update=$(POD_UID)"))
	snap := &Snapshot{CSIDrivers: []storagev1.CSIDriver{}, DaemonSets: []appsv1.DaemonSet{ds}}
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		snap.Nodes = append(snap.Nodes, node(name, linux, `{"stub.csi.example.com":"`+name+`"}`))
		snap.CSINodes = append(snap.CSINodes, csiNode(name, storagev1.CSINodeDriver{Name: stub, NodeID: name}))
		snap.Pods = append(snap.Pods, podOf(ds, name, true))
	}
	opts := Options{ProxyTimeout: 5 * time.Second, ProxyConcurrency: 4}

	r := answer(context.Background(), client, opts, snap)
	if proxy.calls != 0 || nodeOf(t, r, stub, "node-1").Kubelet != nil {
		t.Fatalf("without KubeletState: %d proxy calls, kubelet %+v; want none", proxy.calls, nodeOf(t, r, stub, "node-1").Kubelet)
	}

	opts.KubeletState = true
	r = answer(context.Background(), client, opts, snap)
	if proxy.calls != 3 {
		t.Errorf("proxy calls: %d, want one per node", proxy.calls)
	}
	n1 := nodeOf(t, r, stub, "node-1")
	if k := n1.Kubelet; k == nil || k.Actual != 21 || k.Retired != 20 || len(k.DesiredOnly) != 0 || !strings.HasSuffix(k.Latest, "_8192c3a4_1795739960818-reg.sock") {
		t.Errorf("node-1 kubelet: %+v, want 21 actual, 20 retired", k)
	}
	if len(n1.Warnings) != 0 {
		t.Errorf("node-1: 20 retired paths are below the warning bound: %q", n1.Warnings)
	}
	n2 := nodeOf(t, r, stub, "node-2")
	w := strings.Join(n2.Warnings, "\n")
	if n2.Kubelet == nil || n2.Kubelet.Actual != 0 || !strings.Contains(w, "holds no registration path of the driver while a handover instance is ready") ||
		!strings.Contains(w, "which the handover does not expect") {
		t.Errorf("node-2: %+v %q, want the unexpected deregistration", n2.Kubelet, n2.Warnings)
	}
	if !strings.Contains(w, "dialed "+stub+"_0cdb0d8c_1795739868663-reg.sock and never registered it") || strings.Contains(w, "8192c3a4") {
		t.Errorf("node-2: %q, want the old desired-only path (not the newest, which may be registering now)", n2.Warnings)
	}
	if k := nodeOf(t, r, stub, "node-3").Kubelet; k != nil {
		t.Errorf("node-3: %+v, want not read", k)
	}
	if len(r.Unknown) != 1 || r.Unknown[0].Permission == "" || !strings.Contains(r.Unknown[0].Permission, "nodes/proxy") {
		t.Fatalf("unknown: %+v, want one line naming get nodes/proxy", r.Unknown)
	}
	if d := driverOf(t, r, stub); d.KubeletRetired != 20 {
		t.Errorf("driver's retired: %d, want 20", d.KubeletRetired)
	}
	if r.ExitCode() != ExitIncomplete {
		t.Errorf("exit code %d, want %d (incomplete, nothing unregistered)", r.ExitCode(), ExitIncomplete)
	}

	var table, wide strings.Builder
	if _, err := (&Printer{Out: &table}).Print(r, false); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Printer{Format: OutputWide, Out: &wide}).Print(r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubelet: 20 retired registration path(s)", "missing permission: get nodes/proxy"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if want := "kubelet: 21 registration path(s) in its actual state, 20 retired (a kubelet restart clears them)"; !strings.Contains(wide.String(), want) {
		t.Errorf("wide lacks %q:\n%s", want, wide.String())
	}
}

// TestRollingModeArgs: which registrar arguments turn the mode on.
func TestRollingModeArgs(t *testing.T) {
	for args, want := range map[string]bool{
		"--rolling-update=$(POD_UID)": true,
		"-rolling-update=abc":         true,
		"--rolling-update=":           false,
		"--http-endpoint=:9809":       false,
	} {
		spec := pluginSpec("csi-registrar:dev", stub, args)
		g := &pluginGroup{}
		g.plugin.Containers = []string{"registrar"}
		if got := rollingMode(spec.Containers, g); got != want {
			t.Errorf("%s: %v, want %v", args, got, want)
		}
	}
}

// TestKubeletSaysModePaths: for a node that is not registered, the reason
// names the kubelet's paths of the driver, the rolling-update mode's
// announcement sockets included (<driver>_<instance>_<v>-reg.sock), which
// the reason missed when it matched <driver>-reg.sock only.
func TestKubeletSaysModePaths(t *testing.T) {
	announced := "/var/lib/kubelet/plugins_registry/" + stub + "_0cdb0d8c_1795739868663-reg.sock"
	proxy := &fakeNodeProxy{metrics: map[string]string{"node-1": "# TYPE plugin_manager_total_plugins gauge\n" +
		"plugin_manager_total_plugins{socket_path=\"" + announced + "\",state=\"desired_state_of_world\"} 1\n"}}
	client := proxy.client(t)
	ds := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub, "--rolling-update=$(POD_UID)"))
	snap := &Snapshot{
		Nodes:      []corev1.Node{node("node-1", map[string]string{"kubernetes.io/os": "linux"}, "")},
		CSINodes:   []storagev1.CSINode{csiNode("node-1")},
		CSIDrivers: []storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: stub}}},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "node-1", false)},
	}
	r := answer(context.Background(), client, Options{ProxyTimeout: 5 * time.Second, ProxyConcurrency: 4}, snap)
	n := nodeOf(t, r, stub, "node-1")
	if want := "kubelet's plugin watcher has " + announced + " in desired_state_of_world"; n.State != StateNotRegistered || !strings.Contains(n.Reason, want) {
		t.Errorf("node-1: %s, %q; want not registered, the reason naming %q", n.State, n.Reason, want)
	}
}

// TestKubeletStateRefusedAddress: the API server's own text answer (the
// local node's kubelet listens on 127.0.0.1, which it does not proxy to) is
// named in the unknown line, not "an unknown reason".
func TestKubeletStateRefusedAddress(t *testing.T) {
	proxy := &fakeNodeProxy{refused: map[string]string{"node-1": "address not allowed"}}
	client := proxy.client(t)
	ds := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub, "--rolling-update=$(POD_UID)"))
	snap := &Snapshot{
		Nodes:      []corev1.Node{node("node-1", map[string]string{"kubernetes.io/os": "linux"}, `{"stub.csi.example.com":"node-1"}`)},
		CSINodes:   []storagev1.CSINode{csiNode("node-1", storagev1.CSINodeDriver{Name: stub, NodeID: "node-1"})},
		CSIDrivers: []storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: stub}}},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "node-1", true)},
	}
	r := answer(context.Background(), client, Options{ProxyTimeout: 5 * time.Second, ProxyConcurrency: 4, KubeletState: true}, snap)
	if len(r.Unknown) != 1 || !strings.Contains(r.Unknown[0].Error, "address not allowed") || r.Unknown[0].Permission != "" {
		t.Errorf("unknown: %+v, want one line with the API server's answer and no permission", r.Unknown)
	}
}
