package pluginmanager

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// How long the tests wait for what the registrars and the kubelet's plugin
// manager (a reconciler round every kubeletPeriod, operations of a few ms)
// do, and the observation windows of their "does not happen" proofs, in
// the kubelet's reconciler rounds (kubeletPM.waitRounds).
const (
	registerWait = 15 * time.Second
	// settleRounds: the plugin manager acts on a change in its next round
	// (the plugin watcher at once); three rounds of margin.
	settleRounds = 3
	// cycleRounds: a window past the registrar's first retry (1 s backoff)
	// and kubeletSettle (3 s) at the kubelet's 1 s period, in which a cycle
	// of registrations would show several of one instance.
	cycleRounds = 10
)

// ownSockets returns the announcement sockets of the pod in the directory.
func ownSockets(w *world, podUID string) []string {
	var out []string
	for _, n := range w.announcements() {
		if strings.Contains(n, "_"+csiplugin.InstanceID(podUID)+"_") {
			out = append(out, n)
		}
	}
	return out
}

// Scenario 1, a rollout: A holds the registration; B, a newer pod, starts
// and takes it; A ends and leaves without the kubelet ever unregistering
// the driver, which ends on B's endpoint.
//
// Covers nextAnnouncement (a version above every one announced on the
// node: the CSI handler's validateVersions accepts B's second registration
// and switches the endpoint), decide's stand-by of the older instance, and
// rollExit's confirmedSuccessor → retirePrevious (sockfile.Retire: a
// rename to a hidden name, which the plugin watcher ignores). Without the
// retire, A's exit unlinks its socket by name: the plugin manager calls
// DeRegisterPlugin, which unregisters the driver by name and drops it
// from the CSINode although B holds it.
func TestRollout(t *testing.T) {
	w := newWorld(t, "rollout.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")

	b := startInstance(t, "b", w.driver("b", false), w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "b")
	waitStage(w, a, 5*time.Second, registrar.StageStandingBy)

	a.stop(t) // the old pod ends (SIGTERM)
	w.pm.waitRounds(t, settleRounds)

	if n := w.h.count("deregister", "", time.Time{}); n != 0 {
		t.Errorf("the plugin manager called DeRegisterPlugin %d times during the rollout, want 0", n)
	}
	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times during the rollout, want never", g)
	}
	if !w.kubelet.csiNodeHas(t, w.name) {
		t.Errorf("the CSINode does not list %s after the rollout", w.name)
	}
	if got := w.endpoint(); got != "b" {
		t.Errorf("after the rollout the CSI handler dials %q, want b", got)
	}
	if left := ownSockets(w, "pod-a"); len(left) != 0 {
		t.Errorf("A's sockets are still in the registration directory: %v", left)
	}
	if st := b.r.Status().Stage; st != registrar.StageRegistered {
		t.Errorf("B is at stage %v after A left, want %v", st, registrar.StageRegistered)
	}
	// The kubelet's own state: B's announcement registered, nothing it
	// would dial again.
	ks := w.pm.state()
	if live := ownSockets(w, "pod-b"); len(live) != 1 {
		t.Errorf("B has %d announcement sockets, want 1: %v", len(live), live)
	} else if _, actual := ks.has(filepath.Join(w.reg, live[0])); !actual {
		t.Errorf("the kubelet's actual state does not hold B's announcement %s:\n%s", live[0], ks)
	}
	if d := ks.desiredOnly(); len(d) != 0 {
		t.Errorf("paths in the kubelet's desired state only (it dials them again and again): %v\n%s", d, ks)
	}
}

// Scenario 2: B's driver fails NodeGetInfo. The CSI handler's
// RegisterPlugin then unregisters the driver by name (A's registration with
// it) and fails B's announcement; A takes the registration back, B is not
// registered, and nothing cycles.
//
// Covers rollNotify's failure path (Failed, no retry while another
// instance is eligible) and onPeerEvent's "failed" take-back after
// kubeletSettle. Without the take-back the driver stays unregistered (the
// plugin manager still counts A's socket as registered and never calls it
// again); without the no-retry rule B announces again with a higher
// version, which the handler accepts, fails, and unregisters the driver
// again: a cycle of registrations and gaps.
func TestFailingSuccessor(t *testing.T) {
	w := newWorld(t, "failing.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")

	bd := w.driver("b", true)
	mark := time.Now()
	b := startInstance(t, "b", bd, w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRejected)
	w.waitEndpoint(registerWait, "a")

	// A cycle would show several registrations of B in the window.
	w.pm.waitRounds(t, cycleRounds)
	if n := w.h.count("register", bd.sock, mark); n > 1 {
		t.Errorf("RegisterPlugin was called %d times for B within %d kubelet rounds after its start, want at most 1 (a cycle)", n, cycleRounds)
	}
	if got := w.endpoint(); got != "a" {
		t.Errorf("the CSI handler dials %q, want a", got)
	}
	if g := gaps(w.writes()); g > 1 {
		t.Errorf("the CSINode lost the driver %d times, want at most 1 (B's failed registration)", g)
	}
	if !w.kubelet.csiNodeHas(t, w.name) {
		t.Errorf("the CSINode does not list %s", w.name)
	}
	if st := a.r.Status().Stage; st != registrar.StageRegistered {
		t.Errorf("A is at stage %v, want %v", st, registrar.StageRegistered)
	}
	if st := b.r.Status().Stage; st != registrar.StageRejected {
		t.Errorf("B is at stage %v, want %v", st, registrar.StageRejected)
	}
	if left := ownSockets(w, "pod-b"); len(left) != 0 {
		t.Errorf("B's failed announcement is still in the registration directory (the kubelet redials it): %v", left)
	}
	if ks := w.pm.state(); len(ks.desiredOnly()) != 0 {
		t.Errorf("paths in the kubelet's desired state only (it dials them again and again): %v\n%s", ks.desiredOnly(), ks)
	}
}
