//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/kind/e2e/kubeletlog"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestDriver runs the registration cases that make sense for any driver on
// the driver given with -driver (see driver_suite_test.go), in order, on one
// deployment. Cases 2-5 need case 1's registration; case 6 uninstalls.
func TestDriver(t *testing.T) {
	if dut == nil {
		t.Skip("no -driver: run `make e2e-driver DRIVER=<kustomize dir or manifest file>`")
	}
	deployed := driverCase(t, "1_deployed", "", testAnyDriverDeployed)
	for _, c := range []struct {
		name, restarts string // restarts: the container the case's fault restarts
		f              func(*testing.T)
	}{
		{"2_registrar_pod_deleted", "", testAnyDriverPodDeleted},
		{"3_kubelet_restarted", "", testAnyDriverKubeletRestarted},
		{"4_registration_socket_removed", "", testAnyDriverSocketRemoved},
		{"5_driver_container_killed", dut.driver, testAnyDriverKilled},
	} {
		driverCase(t, c.name, c.restarts, func(t *testing.T) {
			if !deployed {
				t.Skip("case 1 failed: the driver is not registered")
			}
			c.f(t)
		})
	}
	driverCase(t, "6_uninstalled", "", testAnyDriverUninstalled)
}

// driverContext gives a case its context and dumps diagnostics if it fails.
func driverContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
			defer dcancel()
			t.Logf("diagnostics:\n%s", cl.Diagnostics(dctx, dut.nodes))
		}
	})
	return ctx
}

// driverBegin starts cases 2-6: the driver registered as its NodeGetInfo
// says on every node, every pod Ready. It returns the node the case acts on
// and what the kubelet must write there.
func driverBegin(t *testing.T) (context.Context, string, nodeExpect) {
	t.Helper()
	ctx := driverContext(t)
	d := dut
	var e nodeExpect
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		last = nil
		if err := d.updateNodes(ctx); err != nil {
			return false, err
		}
		if len(d.nodes) == 0 {
			last = append(last, "no pod of "+d.spec.Workload.String()+" runs on a node")
			return false, nil
		}
		for _, n := range allNodes {
			if slices.Contains(d.nodes, n) {
				continue
			}
			// No pod here: the driver must not be registered here.
			r, err := cl.Registered(ctx, n, d.name)
			if err != nil {
				return false, err
			}
			if r.Annotated || len(r.Entries) > 0 {
				last = append(last, fmt.Sprintf("node %s runs no pod of %s, yet the driver is registered there (annotation %v, %d CSINode entries)", n, d.spec.Workload, r.Annotated, len(r.Entries)))
			}
		}
		for _, n := range d.nodes {
			x, err := d.expect(ctx, n)
			if err != nil {
				last = append(last, err.Error())
				continue
			}
			r, err := cl.Registered(ctx, n, d.name)
			if err != nil {
				return false, err
			}
			last = append(last, d.problems(r, n, x)...)
			if pod, err := cl.PodOn(ctx, n); err != nil || !PodReady(pod) {
				last = append(last, fmt.Sprintf("no Ready pod on %s (%v)", n, err))
			}
			if n == d.nodes[0] {
				e = x
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		notRegisteredAtStart[t.Name()] = true
		t.Fatalf("not registered at the start of the case: %s", strings.Join(last, "; "))
	}
	return ctx, d.nodes[0], e
}

// driverRegSocket returns the driver's one registration socket on node;
// anything else of the driver's in plugins_registry fails the test.
func driverRegSocket(t *testing.T, ctx context.Context, node string) NodeFile {
	t.Helper()
	files, err := cl.Provider.PluginsRegistry(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	o := dut.files(files)
	if len(o) != 1 || o[0].Name != dut.regSocket() || !o[0].Socket {
		t.Fatalf("%s on %s: files of the driver %q, want exactly the socket %s", PluginsRegistry, node, names(o), dut.regSocket())
	}
	return o[0]
}

// files returns the files of plugins_registry that belong to the driver.
func (d *driverUnderTest) files(all []NodeFile) []NodeFile {
	var out []NodeFile
	for _, f := range all {
		if strings.HasPrefix(f.Name, d.name) {
			out = append(out, f)
		}
	}
	return out
}

// expectSoon waits until the driver on node answers NodeGetInfo (a
// container that just started may not serve its socket yet).
func expectSoon(t *testing.T, ctx context.Context, node string) nodeExpect {
	t.Helper()
	var e nodeExpect
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		e, last = dut.expect(ctx, node)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the driver on %s does not answer within %s: %v", node, shortWait, last)
	}
	return e
}

// samePod fails the test unless pod before is still there (not replaced),
// and returns it as it is now. Container restarts are not judged here: the
// case's result reports them.
func samePod(t *testing.T, ctx context.Context, before *corev1.Pod) *corev1.Pod {
	t.Helper()
	now, err := cl.Client.CoreV1().Pods(cl.Namespace).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != before.UID {
		t.Fatalf("pod %s was replaced", before.Name)
	}
	return now
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// 1. Deployed: on every node the kubelet registers the driver, and wrote
// what the driver's NodeGetInfo says: the annotation maps the driver to its
// node ID, one CSINode entry with that node ID, its topology keys and volume
// limit, the Node's topology labels. The registration socket announces the
// name and --kubelet-registration-path. If the driver is not registered
// within -driver-register-timeout, or the kubelet rejected it twice, the
// case fails with the causes it finds.
func testAnyDriverDeployed(t *testing.T) {
	ctx := driverContext(t)
	d := dut
	for _, n := range d.nodes {
		start := time.Now()
		var attempts int
		var kubeletSaid []string
		registered := false
		for !registered && time.Since(start) < *driverRegisterWait && attempts < 3 {
			r, err := cl.Registered(ctx, n, d.name)
			if err != nil {
				t.Fatal(err)
			}
			if registered = len(r.Entries) == 1; registered {
				break
			}
			if a, said, err := kubeletAttempts(ctx, n, d.name, d.applied); err == nil {
				attempts, kubeletSaid = a, said
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
		if !registered {
			why := fmt.Sprintf("not registered within %s (the kubelet's log shows %d attempts to register it since the apply)", *driverRegisterWait, attempts)
			if attempts >= 3 {
				why = fmt.Sprintf("not registered after %d attempts of the kubelet (its log)", attempts)
			}
			if len(kubeletSaid) > 0 {
				why += "; the kubelet's log about it:\n    " + strings.Join(lastN(kubeletSaid, 8), "\n    ")
			}
			causes := d.diagnose(ctx, n)
			t.Fatalf("node %s: driver %s %s. Causes found:\n  - %s", n, d.name, why, strings.Join(causes, "\n  - "))
		}
		if _, ev, err := d.cnRecs[n].Await(ctx, 0, time.Second, "CSINode entry", func(s State) bool {
			return len(CSINodeEntries(s.CSINode(n), d.name)) == 1
		}); err == nil {
			measure(t, "kubectl apply -> CSINode entry on "+n, ev.At.Sub(d.applied))
		}
		d.cnRecs[n].Stop()

		e, err := d.expect(ctx, n)
		if err != nil {
			t.Fatalf("node %s: %v. Causes found:\n  - %s", n, err, strings.Join(d.diagnose(ctx, n), "\n  - "))
		}
		var reg Registration
		var last []string
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
			var err error
			if reg, err = cl.Registered(ctx, n, d.name); err != nil {
				return false, err
			}
			last = d.problems(reg, n, e)
			return len(last) == 0, nil
		})
		for _, p := range last {
			t.Errorf("%s (expected: %s)", p, e)
		}
		if err != nil && len(last) == 0 {
			t.Fatal(err)
		}
		if d.dialer != nil {
			info, err := RegistrationInfo(ctx, d.dialer, n, PluginsRegistry+"/"+d.regSocket())
			switch {
			case err != nil:
				t.Error(err)
			case info.Type != "CSIPlugin" || info.Name != d.name || info.Endpoint != d.spec.RegistrationPath:
				t.Errorf("GetInfo on %s: type %q, name %q, endpoint %q; want CSIPlugin, %q, %q", d.regSocket(), info.Type, info.Name, info.Endpoint, d.name, d.spec.RegistrationPath)
			}
		}
		driverRegSocket(t, ctx, n)
		pod := podOn(t, ctx, n)
		if !PodReady(pod) {
			t.Errorf("pod %s on %s is not Ready: %s", pod.Name, n, waitingReasons(pod))
		}
		var count string
		if len(reg.Entries) == 1 && reg.Entries[0].Allocatable != nil && reg.Entries[0].Allocatable.Count != nil {
			count = fmt.Sprint(*reg.Entries[0].Allocatable.Count)
		}
		keys := []string{}
		if len(reg.Entries) == 1 {
			keys = reg.Entries[0].TopologyKeys
		}
		t.Logf("node %s: annotation %s: %s=%s; CSINode entry nodeID=%s topologyKeys=%v allocatable=%s; labels %v; pod %s Ready; expected %s",
			n, csiplugin.NodeIDAnnotation, d.name, reg.Annotation, e.nodeID, keys, orDash(count), pick(reg.Labels, keys), pod.Name, e)
	}
	for _, p := range d.csiDriverProblems(ctx) {
		t.Error(p)
	}
}

// measureGone records the time from the delete to a state seen at event i
// of a recorder started before it; the first event is the state before.
func measureGone(t *testing.T, i int, what string, d time.Duration) {
	t.Helper()
	if i == 0 {
		t.Logf("%s: already gone before the delete (not registered then)", what)
		return
	}
	measure(t, "delete -> "+what, d)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// 2. Registrar pod deleted: on SIGTERM the registrar removes its socket, so
// the kubelet unregisters the driver; the workload's new pod registers it
// again, on a new socket, on the node where it runs. A pod that moved
// leaves no registration on the node it left.
func testAnyDriverPodDeleted(t *testing.T) {
	ctx, n, e := driverBegin(t)
	d := dut
	old := podOn(t, ctx, n)
	oldSock := driverRegSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)
	podRec := recordPods(t, ctx)

	// When the kubelet reports the old registrar container terminated, its
	// process has exited: its socket must be gone. A socket there with
	// another identity is a new registrar's if a process listens on it (the
	// controller may have started the replacement already).
	atExit := registryAtExit(ctx, podRec, n, old.UID, d.registrar)
	// The replacement is a pod that did not exist before the delete: on
	// several nodes, the workload's other pods are Ready all along.
	before, err := cl.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	existed := map[types.UID]bool{}
	for _, p := range before {
		existed[p.UID] = true
	}

	t0 := time.Now()
	if err := cl.Client.CoreV1().Pods(cl.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	agone, ev := await(t, ctx, nodeRec, 0, podWait, "annotation key gone", d.annotated(n, e, false))
	measure(t, "pod delete -> annotation key gone", ev.At.Sub(t0))
	gone, ev := await(t, ctx, cnRec, 0, podWait, "CSINode entry gone", d.entryAbsent(n))
	measure(t, "pod delete -> CSINode entry gone", ev.At.Sub(t0))
	l := <-atExit
	if l.err != nil {
		t.Fatal(l.err)
	}
	measure(t, "pod delete -> old registrar reported exited", l.at.Sub(t0))
	for _, f := range d.files(l.files) {
		if f.ID() == oldSock.ID() {
			t.Errorf("the old registrar has exited, yet %s holds its socket %s (%s): stale", PluginsRegistry, f.Name, f.ID())
			continue
		}
		if owner, err := d.socketServed(ctx, n, PluginsRegistry+"/"+f.Name); err != nil {
			t.Errorf("the old registrar has exited, and %s holds %s (%s, not the old socket %s) that no process serves: a leftover (%v)", PluginsRegistry, f.Name, f.ID(), oldSock.ID(), err)
		} else {
			t.Logf("%s at the old registrar's exit: %s (%s) is a new registrar's socket (%s)", PluginsRegistry, f.Name, f.ID(), owner)
		}
	}

	var moved string
	_, ev = await(t, ctx, podRec, 0, podWait, "new pod Ready", func(s State) bool {
		for _, p := range s.Pods() {
			if p.Spec.NodeName != "" && !existed[p.UID] && p.DeletionTimestamp == nil && PodReady(p) {
				moved = p.Spec.NodeName
				return true
			}
		}
		return false
	})
	measure(t, "pod delete -> new pod Ready", ev.At.Sub(t0))
	if moved == n {
		e2 := expectSoon(t, ctx, n) // the new driver process's answer
		_, ev = await(t, ctx, cnRec, gone+1, shortWait, "CSINode entry back", d.entryPresent(n, e2))
		measure(t, "pod delete -> CSINode entry back", ev.At.Sub(t0))
		_, ev = await(t, ctx, nodeRec, agone+1, shortWait, "annotation key back", d.annotated(n, e2, true))
		measure(t, "pod delete -> annotation key back", ev.At.Sub(t0))
		if sock := driverRegSocket(t, ctx, n); sock.ID() == oldSock.ID() {
			t.Errorf("%s is the old pod's socket (%s): stale", sock.Name, sock.ID())
		}
		return
	}
	if !d.spec.Workload.Moves() {
		t.Fatalf("the new pod of %s runs on %s, the old one ran on %s: a DaemonSet's or a pinned pod's replacement runs on the same node", d.spec.Workload, moved, n)
	}
	// The pod moved: registered where it runs now, not where it was.
	t.Logf("the new pod runs on %s, the old one ran on %s", moved, n)
	e2 := expectSoon(t, ctx, moved)
	var last []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		r, err := cl.Registered(ctx, moved, d.name)
		if err != nil {
			return false, err
		}
		last = d.problems(r, moved, e2)
		return len(last) == 0, nil
	})
	if err != nil {
		t.Fatalf("the new pod's node %s: %s", moved, strings.Join(last, "; "))
	}
	measure(t, "pod delete -> CSINode entry back (on the new pod's node)", time.Since(t0))
	driverRegSocket(t, ctx, moved)
	if r, err := cl.Registered(ctx, n, d.name); err != nil || r.Annotated || len(r.Entries) > 0 {
		t.Errorf("node %s, which the pod left, still has the driver registered (annotation %v, CSINode entries %d, %v)", n, r.Annotated, len(r.Entries), err)
	}
	files, err := cl.Provider.PluginsRegistry(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if o := d.files(files); len(o) != 0 {
		t.Errorf("%s on %s, which the pod left, still holds %q", PluginsRegistry, n, names(o))
	}
}

// socketServed says which process listens on path on node, or why none
// does (sockowner).
func (d *driverUnderTest) socketServed(ctx context.Context, node, path string) (string, error) {
	pods, err := cl.Pods(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if p.Spec.NodeName == node {
			c, err := cl.SocketOwner(ctx, p, path)
			if err != nil {
				return "", err
			}
			return "container " + c + " of pod " + p.Name, nil
		}
	}
	return "", fmt.Errorf("no running pod of %s on %s", d.spec.Workload, node)
}

// 3. Kubelet restarted: the new kubelet makes a new attempt to register the
// driver (its log) and keeps it registered: nothing is unregistered
// meanwhile, the same socket, the same pod.
func testAnyDriverKubeletRestarted(t *testing.T) {
	ctx, n, e := driverBegin(t)
	d := dut
	pod := podOn(t, ctx, n)
	sock0 := driverRegSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)

	t0 := time.Now()
	if err := cl.Provider.RestartKubelet(ctx, n); err != nil {
		t.Fatal(err)
	}
	measure(t, "restart -> new kubelet answers /healthz", time.Since(t0))
	measure(t, "restart -> the kubelet's new registration attempt (its log)", waitKubeletAttempt(t, ctx, n, t0, podWait))
	settled(t, ctx, cnRec, shortWait, "CSINode entry", d.entryPresent(n, e))
	if bad := cnRec.All(0, d.entryPresent(n, e)); bad != nil {
		t.Errorf("CSINode entry changed during the restart: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if bad := nodeRec.All(0, d.annotated(n, e, true)); bad != nil {
		t.Errorf("annotation changed during the restart: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if _, said, err := kubeletAttempts(ctx, n, d.name, t0); err == nil {
		for _, l := range said {
			if strings.Contains(l, "RegisterPlugin error") && strings.Contains(l, d.regSocket()) {
				t.Errorf("the kubelet failed the new attempt: %s", l)
			}
		}
	}
	if s := driverRegSocket(t, ctx, n); s.ID() != sock0.ID() {
		t.Errorf("registration socket changed: %s -> %s", sock0.ID(), s.ID())
	}
	samePod(t, ctx, pod)
}

// 4. Registration socket removed on the node: the kubelet unregisters the
// driver; the registrar creates a new socket and the kubelet registers it
// again (csi-registrar without any container restart; a registrar that
// needs one shows it in the restarts).
func testAnyDriverSocketRemoved(t *testing.T) {
	ctx, n, e := driverBegin(t)
	d := dut
	pod := podOn(t, ctx, n)
	sock0 := driverRegSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)

	t0 := time.Now()
	if err := cl.Provider.RemoveFile(ctx, n, PluginsRegistry+"/"+sock0.Name); err != nil {
		t.Fatal(err)
	}
	gone, ev := await(t, ctx, cnRec, 0, shortWait, "CSINode entry gone", d.entryAbsent(n))
	measure(t, "socket removed -> CSINode entry gone", ev.At.Sub(t0))
	// podWait: a registrar that never re-creates its socket is back only
	// once its liveness probe has the container restarted.
	_, ev = await(t, ctx, cnRec, gone+1, podWait, "CSINode entry back", d.entryPresent(n, e))
	measure(t, "socket removed -> CSINode entry back", ev.At.Sub(t0))
	agone, ev := await(t, ctx, nodeRec, 0, shortWait, "annotation key gone", d.annotated(n, e, false))
	measure(t, "socket removed -> annotation key gone", ev.At.Sub(t0))
	_, ev = await(t, ctx, nodeRec, agone+1, shortWait, "annotation key back", d.annotated(n, e, true))
	measure(t, "socket removed -> annotation key back", ev.At.Sub(t0))
	if s := driverRegSocket(t, ctx, n); s.ID() == sock0.ID() {
		t.Errorf("socket %s has the removed one's identity %s", s.Name, s.ID())
	}
	if a, _, err := kubeletAttempts(ctx, n, d.name, t0); err == nil && a == 0 {
		t.Errorf("the driver is registered again, yet the kubelet's log shows no attempt since the removal (%q)", kubeletlog.RegisterLine(d.name))
	}
	samePod(t, ctx, pod)
}

// 5. Driver container killed: the driver container (the one whose process
// listens on the driver's socket) restarts and the pod is Ready again. With
// a registrar container, the kubelet keeps the registration of the dead
// driver and the registrar keeps its socket; a driver that registers
// in-process is registered again on a new socket.
func testAnyDriverKilled(t *testing.T) {
	d := dut
	if d.driverErr != nil {
		t.Fatal(d.driverErr)
	}
	ctx, n, e := driverBegin(t)
	pod := podOn(t, ctx, n)
	sock0 := driverRegSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)
	podRec := recordPods(t, ctx)
	driver := ContainerStatus(pod, d.driver)

	t0 := time.Now()
	if err := cl.Provider.KillContainer(ctx, n, ContainerID(driver)); err != nil {
		t.Fatal(err)
	}
	_, ev := await(t, ctx, podRec, 0, podWait, "driver restarted and pod Ready", func(s State) bool {
		p := s.Pod(string(pod.UID))
		return p != nil && PodReady(p) && ContainerStatus(p, d.driver).RestartCount > driver.RestartCount &&
			ContainerStatus(p, d.driver).State.Running != nil
	})
	measure(t, "driver killed -> restarted, pod Ready", ev.At.Sub(t0))
	if _, ev, err := podRec.Await(ctx, 0, 0, "", podIsReady(pod.UID, false)); err == nil {
		measure(t, "driver killed -> pod not Ready (seen)", ev.At.Sub(t0))
	}
	samePod(t, ctx, pod)
	e2 := expectSoon(t, ctx, n) // the restarted driver answers
	if e2.nodeID != e.nodeID {
		t.Errorf("the restarted driver reports node ID %q, the kubelet registered %q", e2.nodeID, e.nodeID)
	}
	if d.spec.Registrar == "" {
		settled(t, ctx, cnRec, shortWait, "CSINode entry", d.entryPresent(n, e2))
		settled(t, ctx, nodeRec, shortWait, "annotation", d.annotated(n, e2, true))
		driverRegSocket(t, ctx, n)
		return
	}
	if bad := cnRec.All(0, d.entryPresent(n, e)); bad != nil {
		t.Errorf("CSINode entry changed while the driver was dead: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if bad := nodeRec.All(0, d.annotated(n, e, true)); bad != nil {
		t.Errorf("annotation changed while the driver was dead: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if s := driverRegSocket(t, ctx, n); s.ID() != sock0.ID() {
		t.Errorf("registration socket changed: %s -> %s (the kubelet would have unregistered the driver)", sock0.ID(), s.ID())
	}
}

// 6. Uninstalled: deleting the manifests leaves no registration and no file
// of the driver's in plugins_registry.
func testAnyDriverUninstalled(t *testing.T) {
	ctx := driverContext(t)
	d := dut
	type recs struct{ node, cn *Recorder }
	r := map[string]recs{}
	for _, n := range d.nodes {
		a, b := recordNode(t, ctx, n)
		r[n] = recs{a, b}
	}
	t0 := time.Now()
	if _, err := cl.Kubectl(ctx, "delete", "-f", d.manifest, "--ignore-not-found", "--wait=true", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
	measure(t, "kubectl delete (waits for every object to be gone)", time.Since(t0))
	for _, n := range d.nodes {
		i, ev := await(t, ctx, r[n].node, 0, shortWait, "annotation key gone", func(s State) bool {
			nd := s.Node(n)
			if nd == nil {
				return false
			}
			m, err := AnnotationMap(nd)
			_, ok := m[d.name]
			return err == nil && !ok
		})
		measureGone(t, i, "annotation key gone on "+n, ev.At.Sub(t0))
		i, ev = await(t, ctx, r[n].cn, 0, shortWait, "CSINode entry gone", d.entryAbsent(n))
		measureGone(t, i, "CSINode entry gone on "+n, ev.At.Sub(t0))
		files, err := cl.Provider.PluginsRegistry(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if o := d.files(files); len(o) != 0 {
			t.Errorf("%s on %s still holds %q after the uninstall", PluginsRegistry, n, names(o))
		}
	}
	for _, name := range d.spec.CSIDrivers {
		if _, err := cl.Client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CSIDriver %s: %v, want NotFound", name, err)
		}
	}
	w := d.spec.Workload
	var err error
	switch w.Kind {
	case "DaemonSet":
		_, err = cl.Client.AppsV1().DaemonSets(cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "StatefulSet":
		_, err = cl.Client.AppsV1().StatefulSets(cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "Deployment":
		_, err = cl.Client.AppsV1().Deployments(cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	}
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: %v, want NotFound", w, err)
	}
}

// checkSameContainers fails the test unless pod before is still there with
// the same containers and restart counts, except the counts in bumped, which
// must have grown by exactly that much.
func checkSameContainers(t *testing.T, ctx context.Context, before *corev1.Pod, bumped map[string]int32) {
	t.Helper()
	after := podContainers(samePod(t, ctx, before))
	for c, b := range podContainers(before) {
		a := after[c]
		if want := b.RestartCount + bumped[c]; a.RestartCount != want {
			t.Errorf("container %s: restartCount %d, want %d", c, a.RestartCount, want)
		}
		if bumped[c] == 0 && a.ContainerID != b.ContainerID {
			t.Errorf("container %s was replaced: %s -> %s", c, b.ContainerID, a.ContainerID)
		}
	}
}
