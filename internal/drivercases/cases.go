package drivercases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// 1. Deployed: on every node the kubelet registers the driver, and wrote
// what the driver's NodeGetInfo says: the annotation maps the driver to its
// node ID, one CSINode entry with that node ID, its topology keys and volume
// limit, the Node's topology labels. The registration socket announces the
// name and --kubelet-registration-path. If the driver is not registered
// within -driver-register-timeout, or the kubelet rejected it twice, the
// case fails with the causes it finds.
func (s *suite) deployed(t *check) {
	ctx := s.context(t)
	d := s.d
	for _, n := range d.nodes {
		start := time.Now()
		var attempts int
		var kubeletSaid []string
		registered := false
		for !registered && time.Since(start) < s.opt.RegisterTimeout && attempts < 3 {
			r, err := s.cl.Registered(ctx, n, d.name)
			if err != nil {
				t.Fatal(err)
			}
			if registered = r.Registered(); registered {
				break
			}
			if a, said, err := s.kubeletAttempts(ctx, n, d.applied); err == nil {
				attempts, kubeletSaid = a, said
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
		if !registered {
			why := fmt.Sprintf("not registered within %s (the kubelet's log shows %d attempts to register it since the apply)", s.opt.RegisterTimeout, attempts)
			if attempts >= 3 {
				why = fmt.Sprintf("not registered after %d attempts of the kubelet (its log)", attempts)
			}
			if len(kubeletSaid) > 0 {
				why += "; the kubelet's log about it:\n    " + strings.Join(lastN(kubeletSaid, 8), "\n    ")
			}
			causes := s.diagnose(ctx, n)
			t.Fatalf("node %s: driver %s %s. Causes found:\n  - %s", n, d.name, why, strings.Join(causes, "\n  - "))
		}
		if _, ev, err := d.cnRecs[n].Await(ctx, 0, time.Second, "CSINode entry", func(st record.State) bool {
			return len(CSINodeEntries(st.CSINode(n), d.name)) == 1
		}); err == nil {
			t.measure("kubectl apply -> CSINode entry on "+n, ev.At.Sub(d.applied))
		}
		d.cnRecs[n].Stop()

		e, err := s.expect(ctx, n)
		if err != nil {
			t.Fatalf("node %s: %v. Causes found:\n  - %s", n, err, strings.Join(s.diagnose(ctx, n), "\n  - "))
		}
		var reg Registration
		var last []string
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
			var err error
			if reg, err = s.cl.Registered(ctx, n, d.name); err != nil {
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
		sock := s.regSocket(t, ctx, n)
		if s.cl.Dialer != nil {
			info, err := RegistrationInfo(ctx, s.cl.Dialer, n, PluginsRegistry+"/"+sock.Name)
			wantEndpoint := d.spec.RegistrationPath
			if d.rolling() && info.Endpoint != "" {
				wantEndpoint = info.Endpoint // the pod's own socket (the mode)
			}
			switch {
			case err != nil:
				t.Error(err)
			case info.Type != "CSIPlugin" || info.Name != d.name || info.Endpoint != wantEndpoint:
				t.Errorf("GetInfo on %s: type %q, name %q, endpoint %q; want CSIPlugin, %q, %q", sock.Name, info.Type, info.Name, info.Endpoint, d.name, wantEndpoint)
			}
		}
		pod := s.podOn(t, ctx, n)
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
			n, csiplugin.NodeIDAnnotation, d.name, reg.Annotation, e.nodeID, keys, orDash(count), Pick(reg.Labels, keys), pod.Name, e)
	}
	for _, p := range s.csiDriverProblems(ctx) {
		t.Error(p)
	}
}

// measureGone records the time from the delete to a state seen at event i
// of a recorder started before it; the first event is the state before.
func measureGone(t *check, i int, what string, d time.Duration) {
	if i == 0 {
		t.Logf("%s: already gone before the delete (not registered then)", what)
		return
	}
	t.measure("delete -> "+what, d)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// podDeletedRolling is case 2 in the rolling-update mode. The controller
// starts the deleted pod's replacement at once (maxSurge); the old instance,
// alone, waits up to 5 s for the replacement's instance and retires once
// the kubelet confirmed it: no gap. A replacement that takes longer to
// announce (a driver slow to start) costs one gap, measured; more than one,
// or a driver not registered again, fails the case.
func (s *suite) podDeletedRolling(t *check, ctx context.Context, n string, existed map[types.UID]bool,
	nodeRec, cnRec, podRec *record.Recorder, t0 time.Time) {
	d := s.d
	_, ev := await(t, ctx, podRec, 0, podWait, "new pod Ready", func(st record.State) bool {
		for _, p := range st.Pods() {
			if p.Spec.NodeName == n && !existed[p.UID] && p.DeletionTimestamp == nil && PodReady(p) {
				return true
			}
		}
		return false
	})
	t.measure("pod delete -> new pod Ready", ev.At.Sub(t0))
	// The old pod is gone once its instance has left.
	_, ev = await(t, ctx, podRec, 0, podWait, "old pod gone", func(st record.State) bool {
		for _, p := range st.Pods() {
			if existed[p.UID] && p.Spec.NodeName == n {
				return false
			}
		}
		return true
	})
	t.measure("pod delete -> old pod gone", ev.At.Sub(t0))
	// Registered again (a gap that has not ended is measured up to then).
	_, _ = awaitRegistered(ctx, n, d.name, nodeRec, cnRec, shortWait)
	cnGaps, anGaps, all := registrationAbsences(n, d.name, nodeRec, cnRec, t0, time.Now())
	t.Logf("rolling-update mode: node %s: CSINode entry absent: %s; annotation key absent: %s", n, spansText(cnGaps), spansText(anGaps))
	if len(all) > 0 {
		t.measure("pod delete -> unregistered (the old instance left before its replacement was up)", TotalOf(all))
	}
	switch {
	case len(all) > 0 && all[len(all)-1].Open:
		t.Errorf("rolling-update mode: the driver is not registered on %s again after the delete", n)
	case len(all) > 1:
		t.Errorf("rolling-update mode: the driver left the registration on %s %d times after one pod delete, want at most once", n, len(all))
	}
}

// 2. Registrar pod deleted: on SIGTERM the registrar removes its socket, so
// the kubelet unregisters the driver; the workload's new pod registers it
// again, on a new socket, on the node where it runs. A pod that moved
// leaves no registration on the node it left.
func (s *suite) podDeleted(t *check) {
	ctx, n, e := s.begin(t)
	d := s.d
	old := s.podOn(t, ctx, n)
	oldSock := s.regSocket(t, ctx, n)
	nodeRec, cnRec := s.recordNode(t, ctx, n)
	podRec := s.recordPods(t, ctx)

	// When the kubelet reports the old registrar container terminated, its
	// process has exited: its socket must be gone. A socket there with
	// another identity is a new registrar's if a process listens on it (the
	// controller may have started the replacement already).
	atExit := s.registryAtExit(ctx, podRec, n, old.UID, d.registrar)
	// The replacement is a pod that did not exist before the delete: on
	// several nodes, the workload's other pods are Ready all along.
	existed, err := s.podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	if err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.rolling() {
		s.podDeletedRolling(t, ctx, n, existed, nodeRec, cnRec, podRec, t0)
		return
	}
	agone, ev := await(t, ctx, nodeRec, 0, podWait, "annotation key gone", d.annotated(n, e, false))
	t.measure("pod delete -> annotation key gone", ev.At.Sub(t0))
	gone, ev := await(t, ctx, cnRec, 0, podWait, "CSINode entry gone", d.entryAbsent(n))
	t.measure("pod delete -> CSINode entry gone", ev.At.Sub(t0))
	l := <-atExit
	if l.err != nil {
		t.Fatal(l.err)
	}
	t.measure("pod delete -> old registrar reported exited", l.at.Sub(t0))
	for _, f := range d.files(l.files) {
		if f.ID() == oldSock.ID() {
			t.Errorf("the old registrar has exited, yet %s holds its socket %s (%s): stale", PluginsRegistry, f.Name, f.ID())
			continue
		}
		if owner, err := s.socketServed(ctx, n, PluginsRegistry+"/"+f.Name); err != nil {
			t.Errorf("the old registrar has exited, and %s holds %s (%s, not the old socket %s) that no process serves: a leftover (%v)", PluginsRegistry, f.Name, f.ID(), oldSock.ID(), err)
		} else {
			t.Logf("%s at the old registrar's exit: %s (%s) is a new registrar's socket (%s)", PluginsRegistry, f.Name, f.ID(), owner)
		}
	}

	var moved string
	_, ev = await(t, ctx, podRec, 0, podWait, "new pod Ready", func(st record.State) bool {
		for _, p := range st.Pods() {
			if p.Spec.NodeName != "" && !existed[p.UID] && p.DeletionTimestamp == nil && PodReady(p) {
				moved = p.Spec.NodeName
				return true
			}
		}
		return false
	})
	t.measure("pod delete -> new pod Ready", ev.At.Sub(t0))
	if moved == n {
		e2 := s.expectSoon(t, ctx, n) // the new driver process's answer
		_, ev = await(t, ctx, cnRec, gone+1, shortWait, "CSINode entry back", d.entryPresent(n, e2))
		t.measure("pod delete -> CSINode entry back", ev.At.Sub(t0))
		_, ev = await(t, ctx, nodeRec, agone+1, shortWait, "annotation key back", d.annotated(n, e2, true))
		t.measure("pod delete -> annotation key back", ev.At.Sub(t0))
		if sock := s.regSocket(t, ctx, n); sock.ID() == oldSock.ID() {
			t.Errorf("%s is the old pod's socket (%s): stale", sock.Name, sock.ID())
		}
		return
	}
	if !d.spec.Workload.Moves() {
		t.Fatalf("the new pod of %s runs on %s, the old one ran on %s: a DaemonSet's or a pinned pod's replacement runs on the same node", d.spec.Workload, moved, n)
	}
	// The pod moved: registered where it runs now, not where it was.
	t.Logf("the new pod runs on %s, the old one ran on %s", moved, n)
	e2 := s.expectSoon(t, ctx, moved)
	var last []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		r, err := s.cl.Registered(ctx, moved, d.name)
		if err != nil {
			return false, err
		}
		last = d.problems(r, moved, e2)
		return len(last) == 0, nil
	})
	if err != nil {
		t.Fatalf("the new pod's node %s: %s", moved, strings.Join(last, "; "))
	}
	t.measure("pod delete -> CSINode entry back (on the new pod's node)", time.Since(t0))
	s.regSocket(t, ctx, moved)
	if r, err := s.cl.Registered(ctx, n, d.name); err != nil || !r.Absent() {
		t.Errorf("node %s, which the pod left, still has the driver registered (annotation %v, CSINode entries %d, %v)", n, r.Annotated, len(r.Entries), err)
	}
	files, err := s.cl.Node.PluginsRegistry(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if o := d.files(files); len(o) != 0 {
		t.Errorf("%s on %s, which the pod left, still holds %q", PluginsRegistry, n, names(o))
	}
}

// socketServed says which process listens on path on node, or why none
// does (sockowner).
func (s *suite) socketServed(ctx context.Context, node, path string) (string, error) {
	pods, err := s.cl.Pods(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if p.Spec.NodeName == node {
			c, err := SocketOwner(ctx, s.cl.Node, p, path)
			if err != nil {
				return "", err
			}
			return "container " + c + " of pod " + p.Name, nil
		}
	}
	return "", fmt.Errorf("no running pod of %s on %s", s.d.spec.Workload, node)
}

// 3. Kubelet restarted: the new kubelet makes a new attempt to register the
// driver (its log) and keeps it registered: nothing is unregistered
// meanwhile, the same socket, the same pod.
func (s *suite) kubeletRestarted(t *check) {
	ctx, n, e := s.begin(t)
	d := s.d
	pod := s.podOn(t, ctx, n)
	sock0 := s.regSocket(t, ctx, n)
	nodeRec, cnRec := s.recordNode(t, ctx, n)

	t0 := time.Now()
	if err := s.cl.Node.RestartKubelet(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.measure("restart -> new kubelet answers /healthz", time.Since(t0))
	t.measure("restart -> the kubelet's new registration attempt (its log)", s.waitKubeletAttempt(t, ctx, n, t0, podWait))
	settled(t, ctx, cnRec, shortWait, "CSINode entry", d.entryPresent(n, e))
	if bad := cnRec.All(0, d.entryPresent(n, e)); bad != nil {
		t.Errorf("CSINode entry changed during the restart: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if bad := nodeRec.All(0, d.annotated(n, e, true)); bad != nil {
		t.Errorf("annotation changed during the restart: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if _, said, err := s.kubeletAttempts(ctx, n, t0); err == nil {
		for _, l := range said {
			if strings.Contains(l, "RegisterPlugin error") && strings.Contains(l, d.regSocketText()) {
				t.Errorf("the kubelet failed the new attempt: %s", l)
			}
		}
	}
	if s := s.regSocket(t, ctx, n); s.ID() != sock0.ID() {
		t.Errorf("registration socket changed: %s -> %s", sock0.ID(), s.ID())
	}
	s.samePod(t, ctx, pod)
}

// 4. Registration socket removed on the node: the kubelet unregisters the
// driver; the registrar creates a new socket and the kubelet registers it
// again (csi-registrar without any container restart; a registrar that
// needs one shows it in the restarts).
func (s *suite) socketRemoved(t *check) {
	ctx, n, e := s.begin(t)
	d := s.d
	pod := s.podOn(t, ctx, n)
	sock0 := s.regSocket(t, ctx, n)
	nodeRec, cnRec := s.recordNode(t, ctx, n)

	t0 := time.Now()
	if err := s.cl.Node.RemoveFile(ctx, n, PluginsRegistry+"/"+sock0.Name); err != nil {
		t.Fatal(err)
	}
	gone, ev := await(t, ctx, cnRec, 0, shortWait, "CSINode entry gone", d.entryAbsent(n))
	t.measure("socket removed -> CSINode entry gone", ev.At.Sub(t0))
	// podWait: a registrar that never re-creates its socket is back only
	// once its liveness probe has the container restarted.
	_, ev = await(t, ctx, cnRec, gone+1, podWait, "CSINode entry back", d.entryPresent(n, e))
	t.measure("socket removed -> CSINode entry back", ev.At.Sub(t0))
	agone, ev := await(t, ctx, nodeRec, 0, shortWait, "annotation key gone", d.annotated(n, e, false))
	t.measure("socket removed -> annotation key gone", ev.At.Sub(t0))
	_, ev = await(t, ctx, nodeRec, agone+1, shortWait, "annotation key back", d.annotated(n, e, true))
	t.measure("socket removed -> annotation key back", ev.At.Sub(t0))
	if s := s.regSocket(t, ctx, n); s.ID() == sock0.ID() {
		t.Errorf("socket %s has the removed one's identity %s", s.Name, s.ID())
	}
	if a, _, err := s.kubeletAttempts(ctx, n, t0); err == nil && a == 0 {
		t.Errorf("the driver is registered again, yet the kubelet's log shows no attempt since the removal (%q)", kubeletlog.RegisterLine(d.name))
	}
	s.samePod(t, ctx, pod)
}

// 5. Driver container killed: the driver container (the one whose process
// listens on the driver's socket) restarts and the pod is Ready again. With
// a registrar container, the kubelet keeps the registration of the dead
// driver and the registrar keeps its socket; a driver that registers
// in-process is registered again on a new socket.
func (s *suite) driverKilled(t *check) {
	d := s.d
	if d.driverErr != nil {
		t.Fatal(d.driverErr)
	}
	ctx, n, e := s.begin(t)
	pod := s.podOn(t, ctx, n)
	sock0 := s.regSocket(t, ctx, n)
	nodeRec, cnRec := s.recordNode(t, ctx, n)
	podRec := s.recordPods(t, ctx)
	driver := ContainerStatus(pod, d.driver)

	t0 := time.Now()
	if err := s.cl.Node.KillContainer(ctx, n, ContainerID(driver)); err != nil {
		t.Fatal(err)
	}
	_, ev := await(t, ctx, podRec, 0, podWait, "driver restarted and pod Ready", func(st record.State) bool {
		p := st.Pod(string(pod.UID))
		return p != nil && PodReady(p) && ContainerStatus(p, d.driver).RestartCount > driver.RestartCount &&
			ContainerStatus(p, d.driver).State.Running != nil
	})
	t.measure("driver killed -> restarted, pod Ready", ev.At.Sub(t0))
	if _, ev, err := podRec.Await(ctx, 0, 0, "", podIsReady(pod.UID, false)); err == nil {
		t.measure("driver killed -> pod not Ready (seen)", ev.At.Sub(t0))
	}
	s.samePod(t, ctx, pod)
	e2 := s.expectSoon(t, ctx, n) // the restarted driver answers
	if e2.nodeID != e.nodeID {
		t.Errorf("the restarted driver reports node ID %q, the kubelet registered %q", e2.nodeID, e.nodeID)
	}
	if d.spec.Registrar == "" {
		settled(t, ctx, cnRec, shortWait, "CSINode entry", d.entryPresent(n, e2))
		settled(t, ctx, nodeRec, shortWait, "annotation", d.annotated(n, e2, true))
		s.regSocket(t, ctx, n)
		return
	}
	if bad := cnRec.All(0, d.entryPresent(n, e)); bad != nil {
		t.Errorf("CSINode entry changed while the driver was dead: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if bad := nodeRec.All(0, d.annotated(n, e, true)); bad != nil {
		t.Errorf("annotation changed while the driver was dead: %s at +%.3fs", bad.Type, bad.At.Sub(t0).Seconds())
	}
	if s := s.regSocket(t, ctx, n); s.ID() != sock0.ID() {
		t.Errorf("registration socket changed: %s -> %s (the kubelet would have unregistered the driver)", sock0.ID(), s.ID())
	}
}

// 6. Uninstalled: deleting the manifests leaves no registration and no file
// of the driver's in plugins_registry.
func (s *suite) uninstalled(t *check) {
	ctx := s.context(t)
	d := s.d
	type recs struct{ node, cn *record.Recorder }
	r := map[string]recs{}
	for _, n := range d.nodes {
		a, b := s.recordNode(t, ctx, n)
		r[n] = recs{a, b}
	}
	t0 := time.Now()
	if _, err := s.cl.Kubectl(ctx, "delete", "-f", d.manifest, "--ignore-not-found", "--wait=true", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
	t.measure("kubectl delete (waits for every object to be gone)", time.Since(t0))
	for _, n := range d.nodes {
		i, ev := await(t, ctx, r[n].node, 0, shortWait, "annotation key gone", AnnotatedWith(n, d.name, false, nil))
		measureGone(t, i, "annotation key gone on "+n, ev.At.Sub(t0))
		i, ev = await(t, ctx, r[n].cn, 0, shortWait, "CSINode entry gone", d.entryAbsent(n))
		measureGone(t, i, "CSINode entry gone on "+n, ev.At.Sub(t0))
		files, err := s.cl.Node.PluginsRegistry(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if o := d.files(files); len(o) != 0 {
			t.Errorf("%s on %s still holds %q after the uninstall", PluginsRegistry, n, names(o))
		}
	}
	for _, name := range d.spec.CSIDrivers {
		if _, err := s.cl.Client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CSIDriver %s: %v, want NotFound", name, err)
		}
	}
	w := d.spec.Workload
	var err error
	switch w.Kind {
	case "DaemonSet":
		_, err = s.cl.Client.AppsV1().DaemonSets(s.cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "StatefulSet":
		_, err = s.cl.Client.AppsV1().StatefulSets(s.cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "Deployment":
		_, err = s.cl.Client.AppsV1().Deployments(s.cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	}
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: %v, want NotFound", w, err)
	}
}
