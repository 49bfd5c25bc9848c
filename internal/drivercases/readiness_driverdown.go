package drivercases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// CaseNewerDriverFails runs only when chosen (Options.Cases), not with
// R1-R4 by default.
const CaseNewerDriverFails = "R5_newer_driver_fails"

// R5's settings.
const (
	// holdOldPodSeconds is the DaemonSet's minReadySeconds while R5 runs:
	// the controller keeps the old pod beside the new one once the new one
	// is Ready (its manage loop still deletes an old pod that is not Ready
	// beside a new one, as a standing-by instance is).
	holdOldPodSeconds = 300
	// driverStableWindow is how long the restarted driver must be ready
	// before the newer instance claims the registration again (docs/design.md,
	// "The instance's own driver while another instance runs"); startedAt
	// has a resolution of one second.
	driverStableWindow = 10 * time.Second
	// takeBackWait bounds each wait for the kubelet's log.
	takeBackWait = time.Minute
)

// R5. A newer driver that fails after its instance was confirmed: the
// workload rolls with minReadySeconds raised (the old pod stays); once the
// kubelet confirmed the new instance (its log registers the new pod's
// endpoint) and the new pod is Ready, verify kills the new pod's driver
// container through the node's runtime (as case 5). The kubelet must
// register the old pod's endpoint again, once, without unregistering the
// driver (no gap in the Node annotation or the CSINode entry); the new
// instance must claim the registration again only after its restarted
// driver has been ready for the stable window, once while the old pod runs.
// minReadySeconds is restored at the end.
func (s *suite) newerDriverFails(t *check) {
	ctx, n, _ := s.begin(t)
	d := s.d
	w := d.spec.Workload
	switch {
	case s.blockRoll != "":
		t.Skipf("R1: %s", s.blockRoll)
	case !d.rolling():
		t.notJudged("the manifests do not turn on the rolling-update mode (--rolling-update): no older instance stands by to take the registration back when the newer driver fails. See %s", ReadinessDoc)
	case d.driverErr != nil:
		t.notJudged("verify cannot tell the driver's container, so it cannot kill it: %v. See %s", d.driverErr, ReadinessDoc)
	case w.Kind != "DaemonSet":
		t.notJudged("%s: R5 keeps the old pod beside the new one with a DaemonSet's minReadySeconds. See %s", w, ReadinessDoc)
	case w.OnDelete():
		t.notJudged("%s has updateStrategy OnDelete: a template change rolls out nothing", w)
	}
	dss := s.cl.Client.AppsV1().DaemonSets(s.cl.Namespace)
	ds, err := dss.Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeRec, cnRec := s.recordNode(t, ctx, n)
	podRec := s.recordPods(t, ctx)
	before, err := s.cl.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	was := map[types.UID]bool{}
	for _, p := range before {
		was[p.UID] = true
	}
	old := s.podOn(t, ctx, n)
	oldSock := s.socketFor(old)
	oldPodGoing := func(st record.State) bool {
		p := st.Pod(string(old.UID))
		return p == nil || p.DeletionTimestamp != nil
	}

	tRoll := time.Now()
	restoreMinReady := s.holdOldPods(t, ctx, ds.Spec.MinReadySeconds, "newer-driver-fails-"+tRoll.UTC().Format(time.RFC3339Nano))
	// The kill comes as soon as the kubelet confirmed the new instance: the
	// old instance stands by then (its /readyz 503), and the DaemonSet
	// controller deletes an old pod that is not Ready beside a new one.
	_, ev := await(t, ctx, podRec, 0, podWait, "the new pod's driver running", func(st record.State) bool {
		for _, p := range st.Pods() {
			if p.Spec.NodeName == n && !was[p.UID] && p.DeletionTimestamp == nil && ContainerStatus(p, d.driver).State.Running != nil {
				return true
			}
		}
		return false
	})
	var nw *corev1.Pod
	for _, p := range ev.State.Pods() {
		if p.Spec.NodeName == n && !was[p.UID] && p.DeletionTimestamp == nil {
			nw = p
		}
	}
	newSock := s.socketFor(nw)
	confirmed := s.awaitRegisterAt(t, ctx, n, newSock, tRoll, "the kubelet registering the new pod's endpoint (the new instance confirmed)")
	t.measure("template change -> the kubelet registers the new pod's endpoint", confirmed.Sub(tRoll))
	driver := ContainerStatus(nw, d.driver)
	t.Logf("the kubelet confirmed the new pod %s's instance beside the old pod %s: killing its driver container %s", nw.Name, old.Name, d.driver)

	t0 := time.Now()
	if err := s.cl.Node.KillContainer(ctx, n, ContainerID(driver)); err != nil {
		t.notJudged("verify could not kill the new pod's driver container %s through the node's runtime: %v", d.driver, err)
	}
	backOld, ok := s.registerAfter(ctx, n, oldSock, t0, takeBackWait)
	if !ok {
		if podRec.All(0, oldPodGoing) != nil {
			t.notJudged("the old pod %s was deleted (the DaemonSet controller) before the kubelet registered its endpoint again: no older instance stood by to take the registration back. See %s", old.Name, ReadinessDoc)
		}
		t.Errorf("after the new pod %s's driver was killed, the kubelet did not register the old pod %s's endpoint %s again within %s: the kubelet keeps sending every CSI call to a dead driver while the old pod's driver could serve them, and mounts on the node fail until the new driver is back. The older instance takes the registration back when the newer driver stops answering the CSI Probe call: run csi-registrar with --rolling-update in both pods, and let Probe fail (or answer ready=false) when the driver cannot serve. See %s",
			nw.Name, old.Name, oldSock, takeBackWait, ReadinessDoc)
		s.unregisteredSince(t, n, nodeRec, cnRec, t0)
		restoreMinReady()
		return
	}
	t.measure("newer driver killed -> the kubelet registers the old pod's endpoint again", backOld.Sub(t0))

	_, ev = await(t, ctx, podRec, 0, podWait, "the new pod's driver restarted", func(st record.State) bool {
		p := st.Pod(string(nw.UID))
		return p != nil && ContainerStatus(p, d.driver).RestartCount > driver.RestartCount && ContainerStatus(p, d.driver).State.Running != nil
	})
	started := ContainerStatus(ev.State.Pod(string(nw.UID)), d.driver).State.Running.StartedAt.Time
	backNew, newOK := s.registerAfter(ctx, n, newSock, backOld, takeBackWait)

	// The old pod goes once it stands by again (or, not Ready beside the
	// new one, earlier); the new instance then announces once more, as the
	// survivor: count up to the old pod's deletion.
	_, ev = await(t, ctx, podRec, 0, rolloutWait, "the old pod deleted", oldPodGoing)
	gone := ev.At
	if p := ev.State.Pod(string(old.UID)); p != nil {
		gone = p.DeletionTimestamp.Time
		if g := p.DeletionGracePeriodSeconds; g != nil {
			gone = gone.Add(-time.Duration(*g) * time.Second)
		}
	}
	windowUnjudged := newOK && !gone.After(backNew)
	switch {
	case windowUnjudged:
		t.addNote(fmt.Sprintf("the stable window is not judged: the DaemonSet controller deleted the old pod %.1f s after its instance took the registration back, before the new instance claimed it again (an instance claims at once when the other one leaves)", gone.Sub(backOld).Seconds()))
		t.Logf("the old pod %s was deleted at +%.1f s, before the new instance claimed the registration again at +%.1f s: the stable window is not judged", old.Name, gone.Sub(t0).Seconds(), backNew.Sub(t0).Seconds())
	case !newOK:
		t.Errorf("the new pod %s's driver restarted at %s, yet the kubelet did not register the new pod's endpoint %s again within %s: the newer instance claims the registration again once its driver has answered the CSI Probe call ready for %s in a row; a driver whose Probe fails or says not ready while it serves keeps the older instance serving until the old pod goes. See %s",
			nw.Name, started.Format(time.RFC3339), newSock, takeBackWait, driverStableWindow, ReadinessDoc)
	case backNew.Sub(started) < driverStableWindow-time.Second:
		t.Errorf("the kubelet registered the new pod's endpoint again %.1f s after its driver restarted, before the stable window (%s): the registration may swing back and forth while the driver crash-loops. See %s",
			backNew.Sub(started).Seconds(), driverStableWindow, ReadinessDoc)
	default:
		t.measure("newer driver restarted -> the kubelet registers the new pod's endpoint again", backNew.Sub(started))
	}
	if log, err := s.cl.Node.KubeletLog(ctx, n, 20000); err != nil {
		t.couldNotCheck("the kubelet's log on %s: %v", n, err)
	} else {
		if newOK && !windowUnjudged {
			if c := registersBetween(log, d.name, newSock, backOld, gone); c != 1 {
				t.Errorf("the kubelet registered the new pod's endpoint %d times after the old pod's took it back and before the old pod went, want once: the registration swung back and forth. See %s", c, ReadinessDoc)
			}
		}
		if c := registersBetween(log, d.name, oldSock, t0, time.Now()); c != 1 {
			t.Errorf("the kubelet registered the old pod's endpoint %d times after the kill, want once. See %s", c, ReadinessDoc)
		}
		for _, line := range strings.Split(log, "\n") {
			if at, ok := kubeletlog.Time(line, t0); ok && !at.Before(t0) && strings.Contains(line, "DeRegisterPlugin request for plugin "+d.name) {
				t.Errorf("the kubelet unregistered the driver on %s after the newer driver was killed: %s", n, strings.TrimSpace(line))
			}
		}
	}
	restoreMinReady()
	if _, err := s.awaitRolledOut(ctx, was, rolloutWait); err != nil {
		t.Fatal(err)
	}
	s.unregisteredSince(t, n, nodeRec, cnRec, t0)
	if windowUnjudged {
		t.verdict = VerdictNotJudged
	}
}

// unregisteredSince fails the case if the driver was not registered on
// node at any time since t0 (the Node annotation and the CSINode entry, by
// the one rule of Registration).
func (s *suite) unregisteredSince(t *check, node string, nodeRec, cnRec *record.Recorder, t0 time.Time) {
	cnGaps, anGaps, all := registrationAbsences(node, s.d.name, nodeRec, cnRec, t0, time.Now())
	if len(all) == 0 {
		t.Logf("the driver stayed registered on %s (Node annotation and CSINode entry) after the newer driver was killed", node)
		return
	}
	t.measure("newer driver killed -> unregistered", TotalOf(all))
	t.Errorf("the driver was not registered on %s for %.1f s after the newer driver was killed (CSINode entry absent: %s; annotation key absent: %s): the kubelet unregistered it instead of switching to the older instance. See %s",
		node, TotalOf(all).Seconds(), spansText(cnGaps), spansText(anGaps), ReadinessDoc)
}

// holdOldPods sets the DaemonSet's minReadySeconds to holdOldPodSeconds
// and rolls it (value: the rollout annotation); the function it returns
// (also run when the case ends) sets minReadySeconds back to was, once.
func (s *suite) holdOldPods(t *check, ctx context.Context, was int32, value string) func() {
	name := s.d.spec.Workload.Name
	dss := s.cl.Client.AppsV1().DaemonSets(s.cl.Namespace)
	patch := fmt.Appendf(nil, `{"spec":{"minReadySeconds":%d,"template":{"metadata":{"annotations":{%q:%q}}}}}`, holdOldPodSeconds, RolloutAnnotation, value)
	if _, err := dss.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(fmt.Errorf("roll %s with minReadySeconds %d: %w", s.d.spec.Workload, holdOldPodSeconds, err))
	}
	t.Logf("rolling %s with minReadySeconds %d (the old pod stays beside the new one; restored to %d when the case ends)", s.d.spec.Workload, holdOldPodSeconds, was)
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		patch := fmt.Appendf(nil, `{"spec":{"minReadySeconds":%d}}`, was)
		if _, err := dss.Patch(rctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("%s", &VerifyError{Err: fmt.Errorf("restore minReadySeconds %d of %s: %w", was, s.d.spec.Workload, err)})
		}
	}
	t.Cleanup(restore)
	return restore
}

// awaitRegisterAt waits for registerAfter and ends the case when it does
// not come (what: the wait, for the message).
func (s *suite) awaitRegisterAt(t *check, ctx context.Context, node, endpoint string, since time.Time, what string) time.Time {
	at, ok := s.registerAfter(ctx, node, endpoint, since, takeBackWait)
	if !ok {
		t.Fatalf("waiting %s for %s: the kubelet's log on %s has no %q line ending in %s", takeBackWait, what, node, kubeletlog.RegisterLine(s.d.name), endpoint)
	}
	return at
}

// registerAfter waits until the kubelet's log on node has a registration
// of the driver at endpoint after since, and returns its time.
func (s *suite) registerAfter(ctx context.Context, node, endpoint string, since time.Time, timeout time.Duration) (time.Time, bool) {
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		log, err := s.cl.Node.KubeletLog(ctx, node, 20000)
		if err != nil {
			return false, nil // verify's own: asked again
		}
		for _, line := range strings.Split(log, "\n") {
			if t, ok := kubeletlog.Time(line, since); ok && t.After(since) && isRegisterAt(line, s.d.name, endpoint) {
				at = t
				return true, nil
			}
		}
		return false, nil
	})
	return at, err == nil
}

// registersBetween counts the kubelet's registrations of driver at
// endpoint logged after since and before until.
func registersBetween(log, driver, endpoint string, since, until time.Time) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if at, ok := kubeletlog.Time(line, since); ok && at.After(since) && at.Before(until) && isRegisterAt(line, driver, endpoint) {
			n++
		}
	}
	return n
}

// isRegisterAt reports whether line is the kubelet's registration of
// driver at endpoint (the path its line ends with).
func isRegisterAt(line, driver, endpoint string) bool {
	return strings.Contains(line, kubeletlog.RegisterLine(driver)) && strings.HasSuffix(strings.TrimSpace(line), endpoint)
}
