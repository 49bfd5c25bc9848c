//go:build csi_deregister_by_endpoint

package pluginmanager

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// These tests run only against the CSI handler patched with
// kind/localnode/patches/csi-deregister-by-endpoint-1.37.patch (`make
// test-pluginmanager-patched`; docs/design.md, "A kubelet that deregisters by
// endpoint"): the same worlds as rolling_test.go, with the bounds such a
// kubelet allows. On stock kubelet code both fail: the handler unregisters the
// driver by name.

// A successor whose NodeGetInfo fails costs no gap: the handler puts the
// holder's endpoint back instead of unregistering the driver
// (TestFailingSuccessor allows one gap, the stock handler's).
func TestPatchedFailingSuccessorKeepsHolder(t *testing.T) {
	w := newWorld(t, "failing.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")

	b := startInstance(t, "b", w.driver("b", true), w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRejected)
	w.pm.waitRounds(t, cycleRounds)

	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times, want never (the patched handler keeps A)\n%s", g, w.h)
	}
	if got := w.endpoint(); got != "a" {
		t.Errorf("the CSI handler dials %q, want a", got)
	}
}

// An announcement of an instance that is not held, unlinked by name (what
// the mode's hidden rename exists to avoid), leaves the driver registered:
// the kubelet calls DeRegisterPlugin with its endpoint, and the handler keeps
// the held one.
func TestPatchedUnlinkOfNotHeldKeepsDriver(t *testing.T) {
	w := newWorld(t, "unlink.csi.test")
	ad := w.driver("a", false)
	a := startInstance(t, "a", ad, w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")
	b := startInstance(t, "b", w.driver("b", false), w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "b")
	waitStage(w, a, 5*time.Second, registrar.StageStandingBy)

	old := ownSockets(w, "pod-a")
	if len(old) == 0 {
		t.Fatal("A has no announcement socket left to unlink")
	}
	mark := time.Now()
	for _, n := range old {
		if err := os.Remove(filepath.Join(w.reg, n)); err != nil {
			t.Fatal(err)
		}
	}
	w.eventually(registerWait, "DeRegisterPlugin with A's endpoint", func() bool {
		return w.h.count("deregister", ad.sock, mark) > 0
	})
	w.pm.waitRounds(t, settleRounds)

	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times after A's socket was unlinked by name, want never\n%s", g, w.h)
	}
	if got := w.endpoint(); got != "b" {
		t.Errorf("the CSI handler dials %q, want b", got)
	}
	for _, n := range old {
		if desired, actual := w.pm.state().has(filepath.Join(w.reg, n)); desired || actual {
			t.Errorf("the kubelet still holds A's unlinked %s (desired %v, actual %v)", n, desired, actual)
		}
	}
}
