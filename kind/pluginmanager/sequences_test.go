package pluginmanager

import (
	"testing"
	"time"
)

// Issue 43's failing sequences that a real kubelet cannot be made to
// produce on demand (shared/reference/mode-review.md), against the kubelet's
// plugin manager and CSI handler in-process, against the handover.
// Each asserts the node's final state only: the driver registered at an
// endpoint whose driver answers, and listed in the CSINode.

// liveRounds bounds, in the kubelet's reconciler rounds, how long after the
// sequence the handover may take to end registered at a live endpoint (the
// bound the previous release's mode needed: past its settle, 3 s, its
// successor wait, 5 s, and a take-back's round).
const liveRounds = 15

// rollOntoB starts pod b's registrar, on driver bd, next to the serving
// pod a, and waits until the kubelet, its rounds settled, holds b's
// endpoint: where both sequences start.
func (w *world) rollOntoB(t *testing.T, bd *driver) {
	t.Helper()
	w.startPod("b", bd, "pod-b")
	w.waitEndpoint(registerWait, "b")
	w.pm.waitRounds(t, settleRounds)
	w.waitEndpoint(5*time.Second, "b")
}

// TestLateConfirmationAtLeave (F2): A and B run, B (newer) holds the
// registration. The kubelet restarts; its registration of what A serves is
// under way (GetInfo answered, no Notify yet) when A's pod is deleted, and
// it completes while A leaves. Then A's driver exits. The driver must end
// registered at a live endpoint (B's driver).
//
// The previous release's mode ended on A's dead endpoint (issue 43's
// closing note).
func TestLateConfirmationAtLeave(t *testing.T) {
	w := newSequenceWorld(t, "lateleave.csi.test")
	ad, bd := w.podDriver("a"), w.podDriver("b")
	a := w.startPod("a", ad, "pod-a")
	w.waitEndpoint(registerWait, "a")
	w.rollOntoB(t, bd)

	// The kubelet restarts. Its registration of the one socket is held
	// after GetInfo.
	h := newHoldingHandler(w.h, w.name, func(string) bool { return true })
	restart := time.Now()
	w.restartKubeletWith(t, h)
	select {
	case <-h.held:
	case <-time.After(registerWait):
		t.Fatalf("the restarted kubelet did not register A's socket within %s", registerWait)
	}
	// A's pod is deleted (SIGTERM) while that registration is under way;
	// it goes on one kubelet round later.
	a.cancel()
	a.cancel = nil
	w.pm.waitRounds(t, 1)
	h.let()
	select {
	case err := <-a.done:
		if err != nil {
			t.Errorf("registrar a: Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("registrar a did not stop within 20 s")
	}
	// A's pod ends: its driver exits.
	ad.srv.Stop()
	left := time.Now()

	ep, live, listed := w.awaitLiveRegistration(t, liveRounds)
	if !live || !listed {
		t.Fatalf("%d kubelet rounds after A left (the restarted kubelet's registration completed while A left, %s after the restart): the CSI handler holds endpoint %q (resolves to %q, driver answers Probe: %v), CSINode lists the driver: %v; want the driver registered at B's live driver",
			liveRounds, left.Sub(restart).Round(time.Millisecond), ep, w.endpoint(), live, listed)
	}
	// And it stays there.
	w.pm.waitRounds(t, settleRounds)
	if ep, live := w.liveEndpoint(); !live {
		t.Errorf("%d rounds later the CSI handler holds endpoint %q, whose driver does not answer", settleRounds, ep)
	}
	if got := w.endpoint(); got != "b" {
		t.Errorf("the CSI handler dials %q, want b", got)
	}
}

// TestDeadSocketAfterKubeletRestart (F4): A (a registrar in a process of
// its own) and B run, B holds the registration. The kubelet restarts and
// registers what A serves; A is killed (SIGKILL, as the OOM killer does
// under the pressure of a restart) and its driver exits the moment the CSI
// handler has registered it, before the kubelet's Notify; then the
// restarted kubelet's registration at B completes. The driver must end
// registered at a live endpoint (B's driver).
//
// The previous release's mode ended with the driver unregistered on
// kubelets 1.34 and 1.35 (issue 43's closing note).
func TestDeadSocketAfterKubeletRestart(t *testing.T) {
	w := newSequenceWorld(t, "deadrestart.csi.test")
	ad, bd := w.podDriver("a"), w.podDriver("b")
	a := startChild(t, "a", w.podOptions(ad, "pod-a"))
	w.waitEndpoint(registerWait, "a")
	w.rollOntoB(t, bd)

	// The kubelet restarts and registers the one socket; A dies as the
	// handler registered it.
	h := newHoldingHandler(w.h, w.name, nil)
	killed := make(chan time.Time, 1)
	h.after = func(string) bool { return true }
	h.afterDo = func() {
		a.kill()
		ad.srv.Stop()
		killed <- time.Now()
	}
	restart := time.Now()
	w.restartKubeletWith(t, h)
	var at time.Time
	select {
	case at = <-killed:
	case <-time.After(registerWait):
		t.Fatalf("the restarted kubelet did not register what A serves within %s", registerWait)
	}
	h.let()

	ep, live, listed := w.awaitLiveRegistration(t, liveRounds)
	if !live || !listed {
		t.Fatalf("%d kubelet rounds after A was killed (%s after the kubelet restarted): the CSI handler holds endpoint %q (driver answers Probe: %v), CSINode lists the driver: %v; DeRegisterPlugin calls since the restart: %d; want the driver registered at B's live driver",
			liveRounds, at.Sub(restart).Round(time.Millisecond), ep, live, listed, w.h.count("deregister", "", restart))
	}
	w.pm.waitRounds(t, settleRounds)
	if ep, live := w.liveEndpoint(); !live {
		t.Errorf("%d rounds later the CSI handler holds endpoint %q, whose driver does not answer", settleRounds, ep)
	}
	if got := w.endpoint(); got != "b" {
		t.Errorf("the CSI handler dials %q, want b", got)
	}
}
