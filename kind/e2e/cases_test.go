//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The cases of the registrar without the rolling-update mode (plainDir).
// They run in this order on one deployment of it. Each starts from it
// deployed and registered everywhere, and leaves it so, except the last,
// which uninstalls it. The mode's faults are verify's cases on manifests/
// (make e2e-driver DRIVER=manifests) and rollout_test.go. These seven are
// not drivercases' (verify's) 1_deployed-7_uninstalled: they judge the
// registrar itself (its metrics, its answer to a kubelet that rejects it),
// so their list and names are their own.
func TestE2E(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"1_deployed", testDeployed},
		{"2_pod_deleted", testPodDeleted},
		{"3_kubelet_restarted", testKubeletRestarted},
		{"4_registration_socket_removed", testSocketRemoved},
		{"5_driver_killed", testDriverKilled},
		{"6_kubelet_rejects", testKubeletRejects},
		{"7_uninstalled", testUninstalled},
	} {
		t.Run(c.name, c.f)
	}
}

// Upper bounds for states that take a kubelet loop or two; generous, since a
// loaded 2-core machine is slow. They bound the wait; the measured times are
// what the cases report.
const (
	shortWait = 30 * time.Second // the kubelet reacting to a socket, a pod status change
	podWait   = 90 * time.Second // a pod deleted and replaced, a kubelet restart
)

// begin gives a case its context, dumps diagnostics if it fails, and checks
// that plainDir is deployed and registered everywhere. A state an earlier
// case left moving (a pod going Ready again) settles first; if it does not,
// plainDir is applied again, colliding topology labels are removed, and as a
// last resort the pods are replaced so that the kubelet registers them anew.
// It returns the node the case acts on.
func begin(t *testing.T) (context.Context, string) { return beginCase(t, cfg) }

// beginCase is begin, with want the configuration the deployment must have
// (case 1 only demands a registration, whatever its values: it checks them).
func beginCase(t *testing.T, want DriverConfig) (context.Context, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
			defer dcancel()
			t.Logf("diagnostics:\n%s", cl.Diagnostics(dctx, allNodes))
		}
	})
	// Uninstalled (as case 7 leaves it): nothing to wait for.
	if _, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Get(ctx, cl.DaemonSet, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Logf("not deployed (no DaemonSet %s/%s); applying %s", cl.Namespace, cl.DaemonSet, plainDir)
	} else if err := cl.WaitDeployed(ctx, want, shortWait); err == nil {
		return ctx, allNodes[0]
	} else {
		t.Logf("not deployed as %s says: %v; applying it again", plainDir, err)
	}
	for _, n := range allNodes {
		nd, err := cl.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range cfg.Topology {
			if got, ok := nd.Labels[k]; ok && got != v {
				if err := setTopologyLabels(ctx, n, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := cl.Apply(ctx, plainDir); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitDeployed(ctx, want, time.Minute); err == nil {
		return ctx, allNodes[0]
	} else {
		t.Logf("still not deployed: %v; replacing the pods", err)
	}
	if err := cl.Client.CoreV1().Pods(cl.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: cl.Selector}); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitDeployed(ctx, want, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return ctx, allNodes[0]
}

func regSocketName() string { return cfg.Driver + "-reg.sock" }

// ours returns the files of plugins_registry that belong to the driver.
func ours(files []NodeFile) []NodeFile {
	var out []NodeFile
	for _, f := range files {
		if strings.HasPrefix(f.Name, cfg.Driver) {
			out = append(out, f)
		}
	}
	return out
}

func names(files []NodeFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Name)
	}
	return out
}

// regSocket returns the driver's one registration socket on node; anything
// else of ours in plugins_registry fails the test.
func regSocket(t *testing.T, ctx context.Context, node string) NodeFile {
	t.Helper()
	files, err := cl.Provider.PluginsRegistry(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	o := ours(files)
	if len(o) != 1 || o[0].Name != regSocketName() || !o[0].Socket {
		t.Fatalf("%s on %s: files of ours %q (sockets: %v), want exactly the socket %s", PluginsRegistry, node, names(o), o, regSocketName())
	}
	return o[0]
}

func metrics(t *testing.T, ctx context.Context, pod string) Metrics {
	t.Helper()
	m, err := cl.Metrics(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func podOn(t *testing.T, ctx context.Context, node string) *corev1.Pod {
	t.Helper()
	p, err := cl.PodOn(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func recordNode(t *testing.T, ctx context.Context, node string) (n, cn *Recorder) {
	t.Helper()
	n, err := cl.RecordNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	cn, err = cl.RecordCSINode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cn.Stop)
	return n, cn
}

func recordPods(t *testing.T, ctx context.Context) *Recorder {
	t.Helper()
	r, err := cl.RecordPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Conditions on recorded states.
func annotated(node string, want bool) func(State) bool {
	return drivercases.AnnotatedWith(node, cfg.Driver, want, func(id string) bool { return !cfg.NodeIDIsNodeName || id == node })
}

func entryPresent(node string) func(State) bool {
	return func(s State) bool {
		return EntryProblems(drivercases.CSINodeEntries(s.CSINode(node), cfg.Driver), node, cfg) == nil
	}
}

func entryAbsent(node string) func(State) bool {
	return func(s State) bool {
		return s.CSINode(node) != nil && len(drivercases.CSINodeEntries(s.CSINode(node), cfg.Driver)) == 0
	}
}

// registryListing is plugins_registry on a node as listed at an event.
type registryListing struct {
	at    time.Time
	files []NodeFile
	err   error
}

// registryAtExit lists plugins_registry on node as soon as podRec records
// that container of the pod with uid terminated (or the pod is gone or
// terminal), and sends the listing.
func registryAtExit(ctx context.Context, podRec *Recorder, node string, uid types.UID, container string) <-chan registryListing {
	atExit := make(chan registryListing, 1)
	go func() {
		_, ev, err := podRec.Await(ctx, 0, podWait, "old registrar exited", func(s State) bool {
			p := s.Pod(string(uid))
			return p == nil || drivercases.ContainerStatus(p, container).State.Terminated != nil ||
				p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		})
		if err != nil {
			atExit <- registryListing{err: err}
			return
		}
		files, err := cl.Provider.PluginsRegistry(ctx, node)
		atExit <- registryListing{at: ev.At, files: files, err: err}
	}()
	return atExit
}

func podIsReady(uid types.UID, want bool) func(State) bool {
	return func(s State) bool {
		p := s.Pod(string(uid))
		return p != nil && drivercases.PodReady(p) == want
	}
}

// settled waits until the latest recorded state satisfies cond: the state
// now, not one seen earlier.
func settled(t *testing.T, ctx context.Context, r *Recorder, timeout time.Duration, what string, cond func(State) bool) Event {
	t.Helper()
	_, ev := await(t, ctx, r, r.Len()-1, timeout, what, cond)
	return ev
}

func await(t *testing.T, ctx context.Context, r *Recorder, from int, timeout time.Duration, what string, cond func(State) bool) (int, Event) {
	t.Helper()
	i, ev, err := r.Await(ctx, from, timeout, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return i, ev
}

// checkRegistered fails the test unless node is registered as configured.
func checkRegistered(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	r, err := cl.Registered(ctx, node, cfg.Driver)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range RegistrationProblems(r, node, cfg) {
		t.Error(p)
	}
}

// 1. Deployed: on every node the kubelet wrote exactly what the DaemonSet
// configures, and the pod is Ready.
func testDeployed(t *testing.T) {
	ctx, _ := beginCase(t, DriverConfig{Driver: cfg.Driver, anyValues: true})
	ds, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Get(ctx, cl.DaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := int(ds.Status.DesiredNumberScheduled); got != len(allNodes) {
		t.Errorf("DaemonSet schedules %d pods, want one on each of the %d nodes", got, len(allNodes))
	}
	for _, n := range allNodes {
		pod := podOn(t, ctx, n)
		if !drivercases.PodReady(pod) {
			t.Errorf("pod %s on %s is not Ready", pod.Name, n)
		}
		r, err := cl.Registered(ctx, n, cfg.Driver)
		if err != nil {
			t.Fatal(err)
		}
		nd, err := cl.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := drivercases.AnnotationMap(nd)
		if err != nil {
			t.Fatal(err)
		}
		if got := m[cfg.Driver]; got != n {
			t.Errorf("node %s: annotation %s maps %s to %q, want %q (--node-id=$(KUBE_NODE_NAME))", n, csiplugin.NodeIDAnnotation, cfg.Driver, got, n)
		}
		if len(r.Entries) != 1 {
			t.Fatalf("CSINode %s: %d entries for %s, want 1: %+v", n, len(r.Entries), cfg.Driver, r.Entries)
		}
		e := r.Entries[0]
		if e.NodeID != n {
			t.Errorf("CSINode %s: nodeID %q, want %q", n, e.NodeID, n)
		}
		if len(e.TopologyKeys) == 0 || strings.Join(e.TopologyKeys, ",") != strings.Join(cfg.TopologyKeys(), ",") {
			t.Errorf("CSINode %s: topologyKeys %q, want %q", n, e.TopologyKeys, cfg.TopologyKeys())
		}
		if e.Allocatable == nil || e.Allocatable.Count == nil || int64(*e.Allocatable.Count) != cfg.MaxVolumes {
			t.Errorf("CSINode %s: allocatable %+v, want count %d", n, e.Allocatable, cfg.MaxVolumes)
		}
		for k, v := range cfg.Topology {
			if got, ok := nd.Labels[k]; !ok || got != v {
				t.Errorf("node %s: label %s=%q (present %v), want %q", n, k, got, ok, v)
			}
		}
		for c, rc := range Restarts(pod) {
			if rc != 0 {
				t.Errorf("pod %s: container %s restarted %d times", pod.Name, c, rc)
			}
		}
		t.Logf("node %s: annotation %s=%s; CSINode entry nodeID=%s topologyKeys=%v allocatable=%d; labels %v; pod %s Ready",
			n, csiplugin.NodeIDAnnotation, nd.Annotations[csiplugin.NodeIDAnnotation], e.NodeID, e.TopologyKeys, *e.Allocatable.Count, drivercases.Pick(nd.Labels, cfg.TopologyKeys()), pod.Name)
	}
	checkDoctor(t, ctx, 0, "healthy: ", cfg.Driver) // csi-registrar doctor agrees (doctor_test.go)
}

// 2. Pod deleted: the old registrar removes its socket on SIGTERM, so the
// kubelet unregisters the driver; the DaemonSet's new pod registers it again.
func testPodDeleted(t *testing.T) {
	ctx, n := begin(t)
	old := podOn(t, ctx, n)
	oldSock := regSocket(t, ctx, n)
	before, err := cl.Provider.PluginsRegistry(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	nodeRec, cnRec := recordNode(t, ctx, n)
	podRec := recordPods(t, ctx)

	// When the kubelet reports the old registrar container terminated, that
	// process has exited: its socket must be gone. Nothing else can have
	// replaced it yet: the DaemonSet creates the new pod only once the old
	// one is terminal. So plugins_registry is listed at that very event.
	atExit := registryAtExit(ctx, podRec, n, old.UID, "registrar")

	t0 := time.Now()
	if err := cl.Client.CoreV1().Pods(cl.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	agone, ev := await(t, ctx, nodeRec, 0, shortWait, "annotation key gone", annotated(n, false))
	measure(t, "pod delete -> annotation key gone", ev.At.Sub(t0))
	gone, ev := await(t, ctx, cnRec, 0, shortWait, "CSINode entry gone", entryAbsent(n))
	measure(t, "pod delete -> CSINode entry gone", ev.At.Sub(t0))

	l := <-atExit
	if l.err != nil {
		t.Fatal(l.err)
	}
	measure(t, "pod delete -> old registrar reported exited", l.at.Sub(t0))
	if o := ours(l.files); len(o) != 0 {
		for _, f := range o {
			if f.ID() == oldSock.ID() {
				t.Errorf("the old registrar has exited, but its socket %s (%s) is still in %s: stale", f.Name, f.ID(), PluginsRegistry)
			} else {
				t.Errorf("the old registrar has exited and no new pod runs, yet %s holds %s (%s)", PluginsRegistry, f.Name, f.ID())
			}
		}
	}

	var newUID types.UID
	_, ev = await(t, ctx, podRec, 0, podWait, "new pod Ready", func(s State) bool {
		for _, p := range s.Pods() {
			if p.Spec.NodeName == n && p.UID != old.UID && drivercases.PodReady(p) {
				newUID = p.UID
				return true
			}
		}
		return false
	})
	measure(t, "pod delete -> new pod Ready", ev.At.Sub(t0))
	_, ev = await(t, ctx, cnRec, gone+1, shortWait, "CSINode entry back", entryPresent(n))
	measure(t, "pod delete -> CSINode entry back", ev.At.Sub(t0))
	_, ev = await(t, ctx, nodeRec, agone+1, shortWait, "annotation key back", annotated(n, true))
	measure(t, "pod delete -> annotation key back", ev.At.Sub(t0))
	checkRegistered(t, ctx, n)

	after, err := cl.Provider.PluginsRegistry(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	sock := regSocket(t, ctx, n)
	if sock.ID() == oldSock.ID() {
		t.Errorf("%s is the old pod's socket (%s): stale", sock.Name, sock.ID())
	}
	if b, a := names(others(before)), names(others(after)); strings.Join(b, ",") != strings.Join(a, ",") {
		t.Errorf("other files in %s changed: %q -> %q", PluginsRegistry, b, a)
	}
	pod := podOn(t, ctx, n)
	if pod.UID != newUID {
		t.Errorf("pod on %s is %s, want the new pod %s", n, pod.UID, newUID)
	}
	for c, rc := range Restarts(pod) {
		if rc != 0 {
			t.Errorf("new pod %s: container %s restarted %d times", pod.Name, c, rc)
		}
	}
}

func others(files []NodeFile) []NodeFile {
	var out []NodeFile
	for _, f := range files {
		if !strings.HasPrefix(f.Name, cfg.Driver) {
			out = append(out, f)
		}
	}
	return out
}

// metricsPoller polls a pod's /metrics and records when each condition was
// first met. Counters only grow, so polling finds the first time to within
// its period without missing anything.
type metricsPoller struct {
	done  chan struct{}
	first map[string]time.Time
	last  Metrics
	err   error
}

func pollMetrics(ctx context.Context, pod string, conds map[string]func(Metrics) bool) *metricsPoller {
	p := &metricsPoller{done: make(chan struct{}), first: map[string]time.Time{}}
	go func() {
		defer close(p.done)
		for {
			m, err := cl.Metrics(ctx, pod)
			now := time.Now()
			if err == nil {
				p.last = m
				for k, c := range conds {
					if _, seen := p.first[k]; !seen && c(m) {
						p.first[k] = now
					}
				}
				if len(p.first) == len(conds) {
					return
				}
			}
			select {
			case <-ctx.Done():
				p.err = fmt.Errorf("metrics of %s: %v; last error %v", pod, ctx.Err(), err)
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

// 3. Kubelet restarted: the kubelet registers the driver again (GetInfo and
// Notify(true) counted by the registrar), nothing is unregistered meanwhile,
// no container restarts.
func testKubeletRestarted(t *testing.T) {
	ctx, n := begin(t)
	pod := podOn(t, ctx, n)
	m0 := metrics(t, ctx, pod.Name)
	sock0 := regSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)
	podRec := recordPods(t, ctx)

	pctx, pcancel := context.WithTimeout(ctx, podWait)
	defer pcancel()
	poll := pollMetrics(pctx, pod.Name, map[string]func(Metrics) bool{
		"GetInfo":      func(m Metrics) bool { return m.Get(MetricGetInfo) > m0.Get(MetricGetInfo) },
		"Notify(true)": func(m Metrics) bool { return m.Get(MetricRegistered) > m0.Get(MetricRegistered) },
	})
	t0 := time.Now()
	if err := cl.Provider.RestartKubelet(ctx, n); err != nil {
		t.Fatal(err)
	}
	measure(t, "restart -> new kubelet answers /healthz", time.Since(t0))
	<-poll.done
	if poll.err != nil {
		t.Fatalf("the kubelet did not register the driver again: %v (before: GetInfo %v, registered %v; last: %v)",
			poll.err, m0.Get(MetricGetInfo), m0.Get(MetricRegistered), poll.last)
	}
	measure(t, "restart -> registrar answered GetInfo", poll.first["GetInfo"].Sub(t0))
	measure(t, "restart -> kubelet's Notify(true)", poll.first["Notify(true)"].Sub(t0))
	_, ev := await(t, ctx, nodeRec, 0, podWait, "Node Ready heartbeat from the new kubelet", func(s State) bool {
		nd := s.Node(n)
		if nd == nil {
			return false
		}
		ready, hb := drivercases.NodeReady(nd)
		return ready && !hb.Before(t0.Truncate(time.Second))
	})
	measure(t, "restart -> Node Ready heartbeat", ev.At.Sub(t0))
	settled(t, ctx, podRec, podWait, "pod Ready", podIsReady(pod.UID, true))

	// Exactly one more registration, on the same socket.
	m1 := metrics(t, ctx, pod.Name)
	for _, s := range []string{MetricGetInfo, MetricRegistered} {
		if d := m1.Get(s) - m0.Get(s); d != 1 {
			t.Errorf("%s grew by %v, want 1 (one registration by the restarted kubelet)", s, d)
		}
	}
	if d := m1.Get(MetricRejected) - m0.Get(MetricRejected); d != 0 {
		t.Errorf("%s grew by %v, want 0", MetricRejected, d)
	}
	if d := m1.SocketCreations() - m0.SocketCreations(); d != 0 {
		t.Errorf("the registrar created %v sockets, want 0", d)
	}
	if s := regSocket(t, ctx, n); s.ID() != sock0.ID() {
		t.Errorf("registration socket changed: %s -> %s", sock0.ID(), s.ID())
	}
	if bad := cnRec.All(0, entryPresent(n)); bad != nil {
		t.Errorf("CSINode entry was not intact during the restart: %s at +%.3fs: %+v", bad.Type, bad.At.Sub(t0).Seconds(), bad.State.CSINode(n).Spec.Drivers)
	}
	if bad := nodeRec.All(0, annotated(n, true)); bad != nil {
		t.Errorf("annotation was not intact during the restart: %s at +%.3fs: %q", bad.Type, bad.At.Sub(t0).Seconds(), bad.State.Node(n).Annotations[csiplugin.NodeIDAnnotation])
	}
	checkSameContainers(t, ctx, pod, nil)
	checkRegistered(t, ctx, n)
}

// 4. Registration socket removed on the node: the kubelet unregisters the
// driver; csi-registrar re-creates the socket at once and the kubelet
// registers it again, without any container restart.
func testSocketRemoved(t *testing.T) {
	ctx, n := begin(t)
	pod := podOn(t, ctx, n)
	m0 := metrics(t, ctx, pod.Name)
	sock0 := regSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)
	podRec := recordPods(t, ctx)

	t0 := time.Now()
	if err := cl.Provider.RemoveFile(ctx, n, PluginsRegistry+"/"+sock0.Name); err != nil {
		t.Fatal(err)
	}
	gone, ev := await(t, ctx, cnRec, 0, shortWait, "CSINode entry gone", entryAbsent(n))
	measure(t, "socket removed -> CSINode entry gone", ev.At.Sub(t0))
	_, ev = await(t, ctx, cnRec, gone+1, shortWait, "CSINode entry back", entryPresent(n))
	measure(t, "socket removed -> CSINode entry back", ev.At.Sub(t0))
	agone, ev := await(t, ctx, nodeRec, 0, shortWait, "annotation key gone", annotated(n, false))
	measure(t, "socket removed -> annotation key gone", ev.At.Sub(t0))
	_, ev = await(t, ctx, nodeRec, agone+1, shortWait, "annotation key back", annotated(n, true))
	measure(t, "socket removed -> annotation key back", ev.At.Sub(t0))
	settled(t, ctx, podRec, shortWait, "pod Ready", podIsReady(pod.UID, true))

	sock := regSocket(t, ctx, n)
	if sock.ID() == sock0.ID() {
		t.Errorf("socket %s has the removed one's identity %s", sock.Name, sock.ID())
	}
	// The kubelet writes CSINode and the annotation before it sends
	// Notify(true): wait for the notification before counting.
	var m1 Metrics
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		var err error
		if m1, err = cl.Metrics(ctx, pod.Name); err != nil {
			return false, nil
		}
		return m1.Get(MetricRegistered)-m0.Get(MetricRegistered) >= 1, nil
	}); err != nil {
		t.Errorf("no Notify(true) after the socket was re-created: %v (metrics %v)", err, m1)
	}
	for s, want := range map[string]float64{
		MetricSocketCreations("deleted"): 1, MetricGetInfo: 1, MetricRegistered: 1, MetricRejected: 0,
	} {
		if d := m1.Get(s) - m0.Get(s); d != want {
			t.Errorf("%s grew by %v, want %v", s, d, want)
		}
	}
	checkSameContainers(t, ctx, pod, nil)
	checkRegistered(t, ctx, n)
	checkDoctorStaleSocket(t, ctx, n) // what a killed registrar leaves, named by csi-registrar doctor
}

// 5. Driver container killed: the kubelet keeps the registration of a dead
// driver; the pod goes not Ready and back when the driver is restarted; the
// registrar keeps running and keeps its socket.
func testDriverKilled(t *testing.T) {
	ctx, n := begin(t)
	pod := podOn(t, ctx, n)
	if rc := drivercases.ContainerStatus(pod, "registrar").RestartCount; rc != 0 {
		t.Fatalf("registrar restartCount %d before the case, want 0", rc)
	}
	m0 := metrics(t, ctx, pod.Name)
	sock0 := regSocket(t, ctx, n)
	nodeRec, cnRec := recordNode(t, ctx, n)
	podRec := recordPods(t, ctx)
	driver := drivercases.ContainerStatus(pod, "driver")

	t0 := time.Now()
	if err := cl.Provider.KillContainer(ctx, n, drivercases.ContainerID(driver)); err != nil {
		t.Fatal(err)
	}
	notReady, ev := await(t, ctx, podRec, 0, shortWait, "pod not Ready", podIsReady(pod.UID, false))
	measure(t, "driver killed -> pod not Ready", ev.At.Sub(t0))
	_, ev = await(t, ctx, podRec, notReady+1, podWait, "pod Ready with the driver restarted", func(s State) bool {
		p := s.Pod(string(pod.UID))
		return p != nil && drivercases.PodReady(p) && drivercases.ContainerStatus(p, "driver").RestartCount > driver.RestartCount
	})
	measure(t, "driver killed -> pod Ready again", ev.At.Sub(t0))

	if bad := cnRec.All(0, entryPresent(n)); bad != nil {
		t.Errorf("CSINode entry changed while the driver was dead: %s at +%.3fs: %+v", bad.Type, bad.At.Sub(t0).Seconds(), bad.State.CSINode(n).Spec.Drivers)
	}
	if bad := nodeRec.All(0, annotated(n, true)); bad != nil {
		t.Errorf("annotation changed while the driver was dead: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	checkSameContainers(t, ctx, pod, map[string]int32{"driver": 1})
	now := podOn(t, ctx, n)
	if rc := drivercases.ContainerStatus(now, "registrar").RestartCount; rc != 0 {
		t.Errorf("registrar restartCount %d, want 0", rc)
	}
	if s := regSocket(t, ctx, n); s.ID() != sock0.ID() {
		t.Errorf("registration socket changed: %s -> %s (the kubelet would have unregistered the driver)", sock0.ID(), s.ID())
	}
	m1 := metrics(t, ctx, pod.Name)
	if d := m1.SocketCreations() - m0.SocketCreations(); d != 0 {
		t.Errorf("the registrar created %v sockets, want 0", d)
	}
	checkRegistered(t, ctx, n)
}

// Backoffs that bound how long a registration takes once the cause of a
// rejection is gone.
const (
	kubeletBackoffInitial = 500 * time.Millisecond        // kubelet: per socket path, doubling
	kubeletBackoffMax     = 2*time.Minute + 2*time.Second // "durationBeforeRetry 2m2s"
	registrarRetryInitial = time.Second                   // csi-registrar: 1 s doubling
	kubeletReconcile      = time.Second                   // the plugin manager's reconciler loop
	registrationSlack     = 5 * time.Second               // API writes, watch delivery, a slow machine
)

func doubling(initial, max time.Duration, n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := float64(initial) * math.Pow(2, float64(n-1))
	if d > float64(max) {
		return max
	}
	return time.Duration(d)
}

// registrationDeadline bounds the time from the fix of a rejection's cause to
// a Ready pod, after `rejections` rejections: the registrar's pending retry,
// then the kubelet's backoff on the socket path, a reconciler loop, a
// readiness probe period. One more rejection than counted may be in flight.
func registrationDeadline(rejections int, retryMax, probePeriod time.Duration) (time.Duration, string) {
	k := rejections + 1
	reg := doubling(registrarRetryInitial, retryMax, k)
	kub := doubling(kubeletBackoffInitial, kubeletBackoffMax, k)
	d := reg + kub + kubeletReconcile + probePeriod + registrationSlack
	return d, fmt.Sprintf("registrar retry %s (1 s doubling, max %s) + kubelet backoff %s (0.5 s doubling, max %s) + reconcile %s + readiness period %s + slack %s, after %d rejections",
		reg, retryMax, kub, kubeletBackoffMax, kubeletReconcile, probePeriod, registrationSlack, rejections)
}

// 6. The kubelet rejects the registration (a Node label collides with the
// driver's topology): the pod stays not Ready with the kubelet's error in
// /readyz while csi-registrar retries; once the label is fixed it registers
// without any container restart, within a deadline derived from both backoffs.
func testKubeletRejects(t *testing.T) {
	ctx, _ := begin(t)
	ds, err := cl.RenderDaemonSet(ctx, retryOverlay)
	if err != nil {
		t.Fatal(err)
	}
	ocfg, err := ConfigOf(ds)
	if err != nil {
		t.Fatal(err)
	}
	if ocfg.RegistrationRetryMax <= 0 || ocfg.RegistrationRetryMax > 30*time.Second {
		t.Fatalf("%s: --registration-retry-max=%s, want about 10s", retryOverlay, ocfg.RegistrationRetryMax)
	}
	probePeriod := 10 * time.Second // the API's default periodSeconds
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "registrar" && c.ReadinessProbe != nil && c.ReadinessProbe.PeriodSeconds > 0 {
			probePeriod = time.Duration(c.ReadinessProbe.PeriodSeconds) * time.Second
		}
	}
	key := cfg.TopologyKeys()[0]
	collide := cfg.Topology[key] + "-collision"

	// Remove the DaemonSet, so that the overlay's pods start on every node at
	// once (a rolling update would wait for each unready pod).
	t0 := time.Now()
	fg := metav1.DeletePropagationForeground
	if err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Delete(ctx, cl.DaemonSet, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		l, err := cl.Client.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cl.Selector})
		if err != nil {
			return false, err
		}
		_, err = cl.Client.AppsV1().DaemonSets(cl.Namespace).Get(ctx, cl.DaemonSet, metav1.GetOptions{})
		return len(l.Items) == 0 && apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("DaemonSet and pods not gone: %v", err)
	}
	if err := waitUnregistered(ctx, shortWait); err != nil {
		t.Fatal(err)
	}
	measure(t, "DaemonSet deleted, driver unregistered everywhere", time.Since(t0))
	for _, n := range allNodes {
		if err := setTopologyLabels(ctx, n, map[string]string{key: collide}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // if the case fails half-way: no colliding label left behind
		for _, n := range allNodes {
			nd, err := cl.Client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
			if err == nil && nd.Labels[key] == collide {
				setTopologyLabels(context.Background(), n, nil)
			}
		}
	})
	t.Logf("every node labelled %s=%s; the driver reports %s=%s", key, collide, key, cfg.Topology[key])

	podRec := recordPods(t, ctx)
	t0 = time.Now()
	if err := cl.Apply(ctx, retryOverlay); err != nil {
		t.Fatal(err)
	}
	// Every node's new pod: rejected at least twice (csi-registrar retried on
	// a new socket, the kubelet tried again), the kubelet's error on /readyz.
	pods := map[string]*corev1.Pod{}
	for _, n := range allNodes {
		_, ev := await(t, ctx, podRec, 0, podWait, "overlay pod running on "+n, func(s State) bool {
			for _, p := range s.Pods() {
				if p.Spec.NodeName == n && drivercases.ContainerStatus(p, "registrar").State.Running != nil {
					pods[n] = p
					return true
				}
			}
			return false
		})
		measure(t, "apply overlay -> registrar running on "+n, ev.At.Sub(t0))
	}
	for _, n := range allNodes {
		pod := pods[n]
		var code int
		var body string
		var m Metrics
		firstRejection := time.Time{}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
			var err error
			if m, err = cl.Metrics(ctx, pod.Name); err != nil {
				return false, nil
			}
			if m.Get(MetricRejected) >= 1 && firstRejection.IsZero() {
				firstRejection = time.Now()
			}
			if m.Get(MetricRejected) < 2 {
				return false, nil
			}
			code, body, err = cl.Readyz(ctx, pod.Name)
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("pod %s on %s: not rejected twice: %v (metrics %v)", pod.Name, n, err, m)
		}
		measure(t, "apply overlay -> first rejection seen on "+n, firstRejection.Sub(t0))
		measure(t, "apply overlay -> second rejection seen on "+n, time.Since(t0))
		t.Logf("pod %s: /readyz %d %q", pod.Name, code, strings.TrimSpace(body))
		if code != 503 || !strings.Contains(body, "kubelet rejected: ") || !strings.Contains(body, "topology value collision") ||
			!strings.Contains(body, collide) {
			t.Errorf("pod %s: /readyz %d %q, want 503 with the kubelet's error (topology value collision ... %s)", pod.Name, code, body, collide)
		}
		if m.Get(MetricRegistered) != 0 {
			t.Errorf("pod %s: %s = %v while the label collides", pod.Name, MetricRegistered, m.Get(MetricRegistered))
		}
		r, err := cl.Registered(ctx, n, cfg.Driver)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Absent() {
			t.Errorf("node %s: registered while the label collides: annotation %v, entries %+v", n, r.Annotated, r.Entries)
		}
	}
	checkDoctor(t, ctx, 1, "collides with the Node's label "+key+"="+collide, "not registered") // named by csi-registrar doctor
	if bad := podRec.All(0, func(s State) bool {
		for _, p := range s.Pods() {
			if drivercases.PodReady(p) {
				return false
			}
		}
		return true
	}); bad != nil {
		t.Errorf("a pod was Ready while the label collided (at +%.3fs)", bad.At.Sub(t0).Seconds())
	}
	if t.Failed() {
		t.FailNow()
	}

	// Fix the label: the kubelet will write the driver's value itself.
	tFix := time.Now()
	for _, n := range allNodes {
		if err := setTopologyLabels(ctx, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	fixed := podRec.Len()
	var deadline time.Duration
	for _, n := range allNodes {
		m := metrics(t, ctx, pods[n].Name)
		d, why := registrationDeadline(int(m.Get(MetricRejected)), ocfg.RegistrationRetryMax, probePeriod)
		t.Logf("node %s: deadline %s = %s", n, d, why)
		deadline = max(deadline, d)
	}
	for _, n := range allNodes {
		_, ev := await(t, ctx, podRec, fixed, deadline-time.Since(tFix), "pod Ready after the fix on "+n, podIsReady(pods[n].UID, true))
		measure(t, "label fixed -> pod Ready on "+n, ev.At.Sub(tFix))
	}
	for _, n := range allNodes {
		checkRegistered(t, ctx, n)
		pod, err := cl.Client.CoreV1().Pods(cl.Namespace).Get(ctx, pods[n].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for c, rc := range Restarts(pod) {
			if rc != 0 {
				t.Errorf("pod %s: container %s restarted %d times", pod.Name, c, rc)
			}
		}
		m := metrics(t, ctx, pod.Name)
		if m.Get(MetricRegistered) != 1 {
			t.Errorf("pod %s: %s = %v, want 1", pod.Name, MetricRegistered, m.Get(MetricRegistered))
		}
		t.Logf("pod %s: %v rejections, then registered; socket creations %v", pod.Name, m.Get(MetricRejected), m.SocketCreations())
	}

	// Back to plainDir as it was.
	t1 := time.Now()
	if err := cl.Apply(ctx, plainDir); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitDeployed(ctx, cfg, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	measure(t, "apply "+plainDir+" again -> rolled out and registered", time.Since(t1))
}

// 7. Uninstalled: `kubectl delete -k plainDir` leaves no registration and
// no socket of ours.
func testUninstalled(t *testing.T) {
	ctx, _ := begin(t)
	type recs struct{ node, cn *Recorder }
	r := map[string]recs{}
	for _, n := range allNodes {
		a, b := recordNode(t, ctx, n)
		r[n] = recs{a, b}
	}
	t0 := time.Now()
	if err := cl.Delete(ctx, plainDir); err != nil {
		t.Fatal(err)
	}
	measure(t, "kubectl delete -k "+plainDir+" (waits for every object to be gone)", time.Since(t0))
	for _, n := range allNodes {
		_, ev := await(t, ctx, r[n].node, 0, shortWait, "annotation key gone", annotated(n, false))
		measure(t, "delete -> annotation key gone on "+n, ev.At.Sub(t0))
		_, ev = await(t, ctx, r[n].cn, 0, shortWait, "CSINode entry gone", entryAbsent(n))
		measure(t, "delete -> CSINode entry gone on "+n, ev.At.Sub(t0))
		files, err := cl.Provider.PluginsRegistry(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if o := ours(files); len(o) != 0 {
			t.Errorf("%s on %s still holds %q after the uninstall", PluginsRegistry, n, names(o))
		}
		reg, err := cl.Registered(ctx, n, cfg.Driver)
		if err != nil {
			t.Fatal(err)
		}
		if !reg.Absent() {
			t.Errorf("node %s: still registered after the uninstall: annotation %v, entries %+v", n, reg.Annotated, reg.Entries)
		}
	}
	if _, err := cl.Client.StorageV1().CSIDrivers().Get(ctx, cfg.Driver, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CSIDriver %s: %v, want NotFound", cfg.Driver, err)
	}
	if _, err := cl.Client.CoreV1().Namespaces().Get(ctx, cl.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want NotFound", cl.Namespace, err)
	}
}

// checkSameContainers fails the test unless pod before is still there with
// the same containers and restart counts, except the counts in bumped, which
// must have grown by exactly that much.
func checkSameContainers(t *testing.T, ctx context.Context, before *corev1.Pod, bumped map[string]int32) {
	t.Helper()
	now, err := cl.Client.CoreV1().Pods(cl.Namespace).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != before.UID {
		t.Fatalf("pod %s was replaced", before.Name)
	}
	after := podContainers(now)
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

// podContainers returns the statuses of the pod's containers by name.
func podContainers(p *corev1.Pod) map[string]corev1.ContainerStatus {
	m := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		m[s.Name] = s
	}
	return m
}
