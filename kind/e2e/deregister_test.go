//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
)

// What the kubelet's CSI handler does when one instance of a driver goes away
// while another holds the registration: the stock kubelet unregisters the
// driver by name, whichever instance's socket went away (the rule the
// rolling-update mode's hidden renames, take-backs and settle exist for); a
// kubelet built with kind/localnode/patches/csi-deregister-by-endpoint
// (K8S_PATCH=csi-deregister-by-endpoint, which says so in its version) keeps it
// registered unless the endpoint that went away is the one it holds
// (docs/design.md, "A kubelet that deregisters by endpoint").
const (
	// patchedKubeletSuffix ends the version of a kubelet built with the patch.
	patchedKubeletSuffix = "+csi-deregister-by-endpoint"
	// fakeDriverName is the driver the test's fake instances announce: no
	// deployment of the suite uses it.
	fakeDriverName = "deregister-probe.e2e.csi-registrar.io"
	// kubeletRound bounds how long the kubelet takes to act on a socket
	// event (its plugin manager reconciles every second); a state that must not
	// change is watched this long after the kubelet logged its decision.
	kubeletRound = 2 * time.Second
)

func TestKubeletDeregistration(tt *testing.T) {
	t := withRecap(tt)
	if cl.Provider.Name() != "local" {
		t.Skipf("provider %s: the test serves the fake instances' sockets from this machine, which only the local node's kubelet sees", cl.Provider.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	diagnoseOnFailure(t)
	node := allNodes[0]
	n, err := cl.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	version := n.Status.NodeInfo.KubeletVersion
	patched := strings.HasSuffix(version, patchedKubeletSuffix)
	if patched {
		logf("kubelet %s: deregisters by endpoint (patched); expecting the driver to stay registered while the held instance remains", version)
	} else {
		logf("kubelet %s: stock; expecting the driver unregistered by name on the removal of any instance's socket", version)
	}

	rn, err := cl.RecordNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cl.RecordCSINode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rn.Stop(); rc.Stop() })
	registered := func(s State) bool {
		m, err := drivercases.AnnotationMap(s.Node(node))
		_, ok := m[fakeDriverName]
		return err == nil && ok
	}
	inCSINode := func(s State) bool { return len(drivercases.CSINodeEntries(s.CSINode(node), fakeDriverName)) > 0 }
	pos := func() recorderPos { return recorderPos{rn.Len(), rc.Len()} }
	// await waits until the driver is registered (want) or not, in the Node
	// annotation and in CSINode, from the state at the recorders' positions
	// from on (the last state before them included).
	await := func(what string, want bool, from recorderPos) {
		t.Helper()
		for _, r := range []struct {
			rec  *Recorder
			at   int
			cond func(State) bool
		}{{rn, from.node, registered}, {rc, from.csinode, inCSINode}} {
			if _, _, err := r.rec.Await(ctx, max(r.at-1, 0), time.Minute, what, func(s State) bool { return r.cond(s) == want }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// stayed checks that the driver stayed registered from the recorders'
	// positions from on (after a kubelet round for the watch to deliver).
	stayed := func(what string, from recorderPos) {
		t.Helper()
		time.Sleep(kubeletRound) // an observation window, not a wait for a state
		if ev := rn.All(from.node, registered); ev != nil {
			t.Errorf("%s: the Node annotation lost %s at %s", what, fakeDriverName, ev.At.Format("15:04:05.000"))
		}
		if ev := rc.All(from.csinode, inCSINode); ev != nil {
			t.Errorf("%s: the CSINode entry of %s went at %s", what, fakeDriverName, ev.At.Format("15:04:05.000"))
		}
		if !registered(rn.Events(rn.Len() - 1)[0].State) {
			t.Errorf("%s: %s is not in the Node annotation", what, fakeDriverName)
		}
	}

	// Versions above any a run before this one announced (the kubelet keeps
	// the highest until it unregisters the driver).
	base := time.Now().Unix()
	dir := filepath.Join(KubeletRoot, "plugins", fakeDriverName)
	t.Cleanup(func() { _ = os.Remove(dir) }) // registered first: runs after the instances' removal
	start := func(id string, v int64, failing bool) *fakeInstance {
		t.Helper()
		f, err := startFakeInstance(dir, id, fmt.Sprintf("1.%d.0", base+v), node, failing)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.remove)
		return f
	}
	notified := func(f *fakeInstance, want bool) {
		t.Helper()
		select {
		case st := <-f.status:
			if st.PluginRegistered != want {
				t.Fatalf("instance %s: the kubelet notified registered=%v (%q), want %v", f.id, st.PluginRegistered, st.Error, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("instance %s: no NotifyRegistrationStatus from the kubelet within a minute", f.id)
		}
	}
	since := time.Now()

	// 1. Two healthy instances, the second one (a higher version) held.
	from := pos()
	a := start("a", 1, false)
	notified(a, true)
	await("a registered", true, from)
	logf("instance a (%s) registered", a.version)
	b := start("b", 2, false)
	notified(b, true)
	logf("instance b (%s) registered: the kubelet holds its endpoint", b.version)

	// 2. A third one whose NodeGetInfo fails: the CSI handler undoes its registration.
	from = pos()
	c := start("c", 3, true)
	notified(c, false)
	c.remove() // the kubelet retries it by itself (1.36+): gone, it is not retried
	if patched {
		awaitKubeletLine(t, ctx, node, since, "CSI driver "+fakeDriverName+" at endpoint "+c.endpoint+" failed to register: it stays registered at endpoint "+b.endpoint)
		stayed("c's NodeGetInfo failed", from)
		logf("c's registration failed: the driver stayed registered at b's endpoint")
	} else {
		await("unregistered after c failed", false, from)
		logf("c's registration failed: the driver was unregistered")
	}

	// 3. A fourth one, held; then the sockets of a and b removed by name.
	from = pos()
	d := start("d", 4, false)
	notified(d, true)
	await("d registered", true, from)
	logf("instance d (%s) registered: the kubelet holds its endpoint", d.version)
	from = pos()
	removed := time.Now()
	a.remove()
	b.remove()
	for _, f := range []*fakeInstance{a, b} {
		awaitKubeletLine(t, ctx, node, since, "DeRegisterPlugin request for plugin "+fakeDriverName+", endpoint "+f.endpoint)
	}
	if patched {
		for _, f := range []*fakeInstance{a, b} {
			awaitKubeletLine(t, ctx, node, since, "CSI driver "+fakeDriverName+" is registered at endpoint "+d.endpoint+", not "+f.endpoint+": it stays registered")
		}
		stayed("a's and b's sockets removed by name", from)
		logf("a's and b's sockets removed by name: the driver stayed registered at d's endpoint")
	} else {
		await("unregistered after a's and b's sockets went", false, from)
		logf("a's and b's sockets removed by name: the driver unregistered %s later", time.Since(removed).Round(time.Millisecond))
	}

	// Removed by name, a and b are out of the kubelet's plugin manager (no
	// retired path kept, as the mode's hidden renames keep them): only d is there.
	if got := kubeletPluginSockets(t, ctx, fakeDriverName); len(got) != 1 || got[0] != d.regPath+" actual_state_of_world" && got[0] != d.regPath+" actual_state_of_world,desired_state_of_world" {
		t.Errorf("the kubelet's plugin_manager_total_plugins for %s: %q, want only %s in its actual and desired state", fakeDriverName, got, d.regPath)
	}

	// 3b. A probe of the kubelet's rule that an instance can run with the
	// registration API alone: a version below the held one's is rejected
	// (ValidatePlugin: a higher version is registered) only while the driver
	// stayed registered, that is on a kubelet that deregisters by endpoint.
	e := start("e", 3, false) // below d's version
	notified(e, !patched)
	e.remove()
	logf("probe: an instance announcing %s below the held %s was accepted=%v", e.version, d.version, !patched)

	// 4. The held instance's socket removed: unregistered on every kubelet.
	if !patched {
		// The stock kubelet unregistered the driver in step 3; d announces again to be held.
		d.remove()
		from = pos()
		d = start("d2", 6, false)
		notified(d, true)
		await("d registered again", true, from)
	}
	from = pos()
	removed = time.Now()
	d.remove()
	await("unregistered after the held socket went", false, from)
	logf("the held instance's socket removed by name: the driver unregistered %s later", time.Since(removed).Round(time.Millisecond))
}

// kubeletPluginSockets lists the local node's kubelet's
// plugin_manager_total_plugins series for the sockets whose path contains
// name, as "PATH STATE[,STATE]". It asks the kubelet itself (127.0.0.1:10250,
// authenticated as the kubeconfig's admin; the API server's node proxy is not
// authorized on the local node); the kubelet's serving certificate is
// self-signed, so it is not verified.
func kubeletPluginSockets(t testing.TB, ctx context.Context, name string) []string {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", cl.Provider.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.Insecure, rc.CAFile, rc.CAData = true, "", nil
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the kubelet's /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the kubelet's /metrics: %s %v: %.200s", resp.Status, err, body)
	}
	states := map[string][]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "plugin_manager_total_plugins{") || strings.HasSuffix(line, " 0") {
			continue
		}
		var sock, state string
		for _, kv := range strings.Split(line[strings.IndexByte(line, '{')+1:strings.LastIndexByte(line, '}')], ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "socket_path":
				sock = strings.Trim(v, `"`)
			case "state":
				state = strings.Trim(v, `"`)
			}
		}
		if strings.Contains(sock, name) {
			states[sock] = append(states[sock], state)
		}
	}
	var out []string
	for sock, st := range states {
		sort.Strings(st)
		out = append(out, sock+" "+strings.Join(st, ","))
	}
	sort.Strings(out)
	return out
}

// awaitKubeletLine waits until the kubelet logged a line containing want at
// or after since.
func awaitKubeletLine(t testing.TB, ctx context.Context, node string, since time.Time, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		log, err := cl.Provider.KubeletLog(ctx, node, 20000)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(log, "\n") {
			if at, ok := kubeletlog.Time(line, since); ok && !at.Before(since.Truncate(time.Second)) && strings.Contains(line, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not log %q within a minute", want)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
