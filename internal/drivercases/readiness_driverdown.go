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

// CaseNewerDriverFails is R5, the last of the readiness cases.
const CaseNewerDriverFails = "R5_newer_driver_fails"

// R5's settings.
const (
	// holdOldPodSeconds is the DaemonSet's minReadySeconds while R5 runs:
	// the controller deletes the old pod only once the new one has been
	// Ready this long, and meanwhile only if the old one is not Ready (a
	// standing-by csi-registrar whose driver answers Probe is Ready: it is
	// the fallback). Restored as soon as the new instance is back.
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
// workload rolls with minReadySeconds raised (the old pod stays while it is
// Ready); once the kubelet confirmed the new instance (its log registers
// the new pod's endpoint) verify kills the new pod's driver container
// through the node's runtime (as case 5). The kubelet must register the old
// pod's endpoint again, once, without unregistering the driver (no gap in
// the Node annotation or the CSINode entry); the new instance must claim
// the registration again only after its restarted driver has been ready
// for the stable window, once while the old pod stays. Once the new pod is
// Ready again, minReadySeconds is restored and the old pod goes.
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
	case s.socketThief:
		// The restarted driver would remove the old instance's socket again:
		// whatever the kubelet then does is R3's finding, not this case's.
		t.notJudged("R3 saw the new instance remove the old one's socket: the new pod's restarted driver would remove the old instance's socket again, so whether the old instance takes the registration back cannot be told. Fix R3 first. See %s", ReadinessDoc)
	}
	dss := s.cl.Client.AppsV1().DaemonSets(s.cl.Namespace)
	ds, err := dss.Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeRec, cnRec := s.recordNode(t, ctx, n)
	podRec := s.recordPods(t, ctx)
	was, err := s.podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := s.podOn(t, ctx, n)
	switch h, err := s.handoverOn(ctx, n, old); {
	case err != nil:
		t.Fatal(err)
	case h.on():
		t.Logf("the handover on %s: the registration socket %s, the endpoint link %s -> %s", n, s.d.regSocket(), handoverLinkName, h.Link)
		s.newerDriverFailsHandover(t, ctx, n, old, was, nodeRec, cnRec, podRec, ds.Spec.MinReadySeconds)
		return
	}
	seen := r5Seen{oldPod: old.Name, oldSock: s.socketFor(old)}
	oldGoing := podGoing(old.UID)
	// oldGone: when the old pod's deletion was asked (zero: not yet).
	oldGone := func() time.Time { return deletionAsked(podRec, old.UID) }

	tRoll := time.Now()
	restoreMinReady := s.holdOldPods(t, ctx, ds.Spec.MinReadySeconds, "newer-driver-fails-"+tRoll.UTC().Format(time.RFC3339Nano))
	// The kill comes as soon as the kubelet confirmed the new instance: the
	// earliest failure the old instance must cover.
	nw := s.awaitNewDriverRunning(t, ctx, podRec, n, was)
	seen.newPod, seen.newSock = nw.Name, s.socketFor(nw)
	confirmed := s.awaitRegisterAt(t, ctx, n, seen.newSock, tRoll, "the kubelet registering the new pod's endpoint (the new instance confirmed)")
	t.measure("template change -> the kubelet registers the new pod's endpoint", confirmed.Sub(tRoll))
	driver := ContainerStatus(nw, d.driver)
	t.Logf("the kubelet confirmed the new pod %s's instance beside the old pod %s: killing its driver container %s", nw.Name, old.Name, d.driver)

	seen.kill = time.Now()
	if err := s.cl.Node.KillContainer(ctx, n, ContainerID(driver)); err != nil {
		t.notJudged("verify could not kill the new pod's driver container %s through the node's runtime: %v", d.driver, err)
	}
	seen.backOld, _ = s.registerAfter(ctx, n, seen.oldSock, seen.kill, takeBackWait)
	if !seen.backOld.IsZero() {
		t.measure("newer driver killed -> the kubelet registers the old pod's endpoint again", seen.backOld.Sub(seen.kill))
		seen.started = s.awaitDriverRestarted(t, ctx, podRec, nw, driver)
		seen.backNew, _ = s.registerAfter(ctx, n, seen.newSock, seen.backOld, takeBackWait)
	}
	if !seen.backNew.IsZero() {
		t.measure("newer driver restarted -> the kubelet registers the new pod's endpoint again", seen.backNew.Sub(seen.started))
		// The old pod stays (it is Ready, standing by as the fallback)
		// until the new one is available: Ready, then minReadySeconds
		// restored. Registrations until its deletion count as "while the
		// old pod stays".
		await(t, ctx, podRec, 0, podWait, "the new pod Ready again", func(st record.State) bool {
			p := st.Pod(string(nw.UID))
			return p != nil && PodReady(p)
		})
	}
	// Seen (in the order of the watch, not by clocks) before the restore:
	// the controller deleted the old pod while minReadySeconds held it.
	seen.early = !oldGone().IsZero()
	seen.held = time.Now()
	restoreMinReady()
	if oldGone().IsZero() {
		await(t, ctx, podRec, 0, rolloutWait, "the old pod deleted", oldGoing)
	}
	seen.oldGone = oldGone()
	t.Logf("the old pod %s was deleted at %+.1f s after the kill", old.Name, seen.oldGone.Sub(seen.kill).Seconds())
	if log, err := s.cl.Node.KubeletLog(ctx, n, 20000); err != nil {
		t.couldNotCheck("the kubelet's log on %s: %v", n, err)
	} else {
		seen.count(log, d.name)
		for _, f := range judgeNewerDriverFails(seen) {
			t.Errorf("%s. See %s", f, ReadinessDoc)
		}
	}
	if _, err := s.awaitRolledOut(ctx, was, rolloutWait); err != nil {
		t.Fatal(err)
	}
	s.unregisteredSince(t, n, nodeRec, cnRec, seen.kill)
}

// r5Seen is what R5 saw, from the kill of the new pod's driver on (times
// from the kubelet's log and the recorded pods).
type r5Seen struct {
	oldPod, newPod   string
	oldSock, newSock string    // the endpoints, as the kubelet's log ends its lines
	kill             time.Time // the new pod's driver container killed
	backOld          time.Time // the kubelet registered the old pod's endpoint again (zero: not within takeBackWait)
	started          time.Time // the new pod's driver container ran again
	backNew          time.Time // the kubelet registered the new pod's endpoint again (zero: not within takeBackWait)
	early            bool      // the old pod's deletion was seen before minReadySeconds was restored: it was not Ready beside the new one
	oldGone          time.Time // the old pod's deletion was asked (a second's resolution)
	held             time.Time // minReadySeconds restored: before it, only a pod not Ready could go
	oldRegisters     int       // the old pod's endpoint registered after the kill and before until()
	newRegisters     int       // the new pod's endpoint registered after backOld and before until()
	deregistered     []string  // the kubelet's DeRegisterPlugin lines for the driver after the kill
}

// until is the end of the window "while the old pod stands": when
// minReadySeconds was restored, or the old pod's deletion if it came
// earlier. (A deletionTimestamp has a second's resolution: a deletion that
// follows the new pod's last registration within the second would
// otherwise end the window before it.)
func (s *r5Seen) until() time.Time {
	if s.early || s.held.IsZero() {
		return s.oldGone
	}
	return s.held
}

// count fills the counts of s from the kubelet's log.
func (s *r5Seen) count(log, driver string) {
	s.oldRegisters = registersBetween(log, driver, s.oldSock, s.kill, s.until())
	if !s.backOld.IsZero() {
		s.newRegisters = registersBetween(log, driver, s.newSock, s.backOld, s.until())
	}
	s.deregistered = nil
	for _, line := range strings.Split(log, "\n") {
		if at, ok := kubeletlog.Time(line, s.kill); ok && !at.Before(s.kill) && strings.Contains(line, "DeRegisterPlugin request for plugin "+driver) {
			s.deregistered = append(s.deregistered, strings.TrimSpace(line))
		}
	}
}

// judgeNewerDriverFails returns R5's findings on what it saw, each with its
// cause and fix (none: pass).
func judgeNewerDriverFails(s r5Seen) []string {
	var f []string
	for _, line := range s.deregistered {
		f = append(f, "the kubelet unregistered the driver after the newer driver was killed: "+line)
	}
	// Deleted while minReadySeconds held it: the old pod was not Ready
	// beside the new one (the controller keeps it only while it is Ready).
	early := s.early
	switch {
	case s.backOld.IsZero() && early:
		return append(f, fmt.Sprintf("the DaemonSet controller deleted the old pod %s %+.1f s after the new pod %s's driver was killed, before the kubelet registered the old pod's endpoint %s again: the old pod was not Ready beside the new one (the controller keeps an old pod beside a new one only while it is Ready), so no older instance was left to take the registration back. A standing-by registrar whose driver answers Probe must stay Ready (csi-registrar's /readyz answers 200 \"standing by (ready to take the registration back)\")",
			s.oldPod, s.oldGone.Sub(s.kill).Seconds(), s.newPod, s.oldSock))
	case s.backOld.IsZero():
		return append(f, fmt.Sprintf("after the new pod %s's driver was killed, the kubelet did not register the old pod %s's endpoint %s again within %s: the kubelet keeps sending every CSI call to a dead driver while the old pod's driver could serve them, and mounts on the node fail until the new driver is back. The older instance takes the registration back when the newer driver stops answering the CSI Probe call: run csi-registrar with --rolling-update in both pods, and let Probe fail (or answer ready=false) when the driver cannot serve",
			s.newPod, s.oldPod, s.oldSock, takeBackWait))
	}
	if s.oldRegisters != 1 {
		f = append(f, fmt.Sprintf("the kubelet registered the old pod's endpoint %d times after the kill and before the old pod went, want once: the registration swung back and forth", s.oldRegisters))
	}
	switch {
	case early && (s.backNew.IsZero() || s.oldGone.Before(s.backNew)):
		f = append(f, fmt.Sprintf("the DaemonSet controller deleted the old pod %s %+.1f s after the kill, while its instance held the registration and before the new instance claimed it again: the old pod was not Ready while it held the registration (its readiness must follow the registration and the driver's Probe)",
			s.oldPod, s.oldGone.Sub(s.kill).Seconds()))
	case s.backNew.IsZero():
		f = append(f, fmt.Sprintf("the new pod %s's driver restarted at %s, yet the kubelet did not register the new pod's endpoint %s again within %s: the newer instance claims the registration again once its driver has answered the CSI Probe call ready for %s in a row; a driver whose Probe fails or says not ready while it serves keeps the older instance serving until the old pod goes",
			s.newPod, s.started.UTC().Format(time.RFC3339), s.newSock, takeBackWait, driverStableWindow))
	case s.backNew.Sub(s.started) < driverStableWindow-time.Second:
		f = append(f, fmt.Sprintf("the kubelet registered the new pod's endpoint again %.1f s after its driver restarted, before the stable window (%s): the registration may swing back and forth while the driver crash-loops",
			s.backNew.Sub(s.started).Seconds(), driverStableWindow))
	case s.newRegisters != 1:
		f = append(f, fmt.Sprintf("the kubelet registered the new pod's endpoint %d times after the old pod's took it back and before the old pod went, want once: the registration swung back and forth", s.newRegisters))
	}
	return f
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

// podGoing returns a condition on the recorded pods: the pod with uid is
// gone or being deleted.
func podGoing(uid types.UID) func(record.State) bool {
	return func(st record.State) bool {
		p := st.Pod(string(uid))
		return p == nil || p.DeletionTimestamp != nil
	}
}

// deletionAsked returns when the deletion of the pod with uid was asked, as
// podRec recorded it: its deletionTimestamp less its grace period, or when
// it was seen gone without one. It returns the zero time if podRec has not
// seen the pod go.
func deletionAsked(podRec *record.Recorder, uid types.UID) time.Time {
	going := podGoing(uid)
	ev := podRec.All(0, func(st record.State) bool { return !going(st) })
	if ev == nil {
		return time.Time{}
	}
	if p := ev.State.Pod(string(uid)); p != nil {
		at := p.DeletionTimestamp.Time
		if g := p.DeletionGracePeriodSeconds; g != nil {
			at = at.Add(-time.Duration(*g) * time.Second)
		}
		return at
	}
	return ev.At
}

// awaitNewDriverRunning waits (podWait) until a pod on node n that is not among
// was, nor being deleted, runs its driver container, and returns that pod.
func (s *suite) awaitNewDriverRunning(t *check, ctx context.Context, podRec *record.Recorder, n string, was map[types.UID]bool) *corev1.Pod {
	_, ev := await(t, ctx, podRec, 0, podWait, "the new pod's driver running", func(st record.State) bool {
		for _, p := range st.Pods() {
			if p.Spec.NodeName == n && !was[p.UID] && p.DeletionTimestamp == nil && ContainerStatus(p, s.d.driver).State.Running != nil {
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
	return nw
}

// awaitDriverRestarted waits (podWait) until the driver container of pod
// nw, killed when its status was driver, runs again, and returns when it
// started.
func (s *suite) awaitDriverRestarted(t *check, ctx context.Context, podRec *record.Recorder, nw *corev1.Pod, driver corev1.ContainerStatus) time.Time {
	_, ev := await(t, ctx, podRec, 0, podWait, "the new pod's driver restarted", func(st record.State) bool {
		p := st.Pod(string(nw.UID))
		return p != nil && ContainerStatus(p, s.d.driver).RestartCount > driver.RestartCount && ContainerStatus(p, s.d.driver).State.Running != nil
	})
	return ContainerStatus(ev.State.Pod(string(nw.UID)), s.d.driver).State.Running.StartedAt.Time
}
