package pluginmanager

// No fixed wait after a removal by name (issue 36, item 3): the mode
// re-creates its own deleted announcement at the same path at once,
// announces again at once at the path of a registrar without the mode that
// left, and takes the registration back from a failing successor as soon as
// it published "failed"; the kubelet's own ordering keeps the Node annotation
// and the CSINode entry, also when the API server answers Node updates
// late (fakeSlowNodePatches).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// nodeIDAnnotation is the Node annotation the CSI handler keeps, a JSON map
// of driver name to node ID.
const nodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// fakeSlowNodePatches makes the CSI handler's fake API client answer every
// Node patch (the node info manager's updates of the annotation) d late,
// until the test ends: an API server that answers Node updates late.
var fakeSlowNodePatches struct {
	once  sync.Once
	delay atomic.Int64
}

func slowNodePatches(t *testing.T, k *csiHandler, d time.Duration) {
	fakeSlowNodePatches.once.Do(func() {
		k.client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			time.Sleep(time.Duration(fakeSlowNodePatches.delay.Load()))
			return false, nil, nil // then the object tracker
		})
	})
	fakeSlowNodePatches.delay.Store(int64(d))
	t.Cleanup(func() { fakeSlowNodePatches.delay.Store(0) })
}

// nodeHasID reports whether the Node's annotation lists the driver.
func (k *csiHandler) nodeHasID(t *testing.T, driver string) bool {
	n, err := k.client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Node: %v", err)
	}
	return strings.Contains(n.Annotations[nodeIDAnnotation], `"`+driver+`"`)
}

// TestOwnSocketDeletedSlowAPI: A holds the registration; someone deletes
// A's announcement socket while the API server answers Node updates 1.5 s
// late. A serves it again at once at the same path with the same version;
// the kubelet unregisters the deleted one (its uninstall is slow) before it
// registers the new one, so the driver comes back with its Node
// annotation and CSINode entry, as it does for a registrar without the mode.
func TestOwnSocketDeletedSlowAPI(t *testing.T) {
	w := newWorld(t, "deleted-own.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")
	own := ownSockets(w, "pod-a")
	if len(own) != 1 {
		t.Fatalf("A has %d announcements, want 1: %v", len(own), own)
	}
	path := filepath.Join(w.reg, own[0])
	w.eventually(registerWait, "the kubelet's operation on A's announcement ended", func() bool { return w.registeredNow(path) })
	if !w.kubelet.nodeHasID(t, w.name) || !w.kubelet.csiNodeHas(t, w.name) {
		t.Fatalf("before the deletion the Node annotation or the CSINode lacks %s", w.name)
	}

	slowNodePatches(t, w.kubelet, 1500*time.Millisecond)
	mark := time.Now()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.eventually(registerWait, "A's announcement served again at its path", func() bool {
		_, err := os.Lstat(path)
		return err == nil
	})
	w.eventually(registerWait, "the kubelet registered A's re-created announcement", func() bool {
		return w.h.count("register", "", mark) > 0 && w.registeredNow(path) && a.r.Status().Stage == registrar.StageRegistered
	})
	t.Logf("A registered again %s after the deletion (Node patches 1.5 s late)", time.Since(mark).Round(10*time.Millisecond))
	w.keptRegistered(t, "a", false)
	if own := ownSockets(w, "pod-a"); len(own) != 1 || own[0] != filepath.Base(path) {
		t.Errorf("A's announcements are %v, want only %s (the same path, the same version)", own, filepath.Base(path))
	}
	if n := w.h.count("deregister", "", mark); n != 1 {
		t.Errorf("the kubelet called DeRegisterPlugin %d times after the deletion, want 1 (the deleted socket's)", n)
	}
	if g := gaps(w.writes()); g > 1 {
		t.Errorf("the CSINode lost the driver %d times, want at most 1 (the deletion)", g)
	}
	if ks := w.pm.state(); len(ks.desiredOnly()) != 0 || len(ks.retired(w.name)) != 0 {
		t.Errorf("after the re-creation the kubelet holds retired or desired-only paths: %v %v\n%s", ks.retired(w.name), ks.desiredOnly(), ks)
	}
}

// TestFailingSuccessorSlowAPI is TestFailingSuccessor with Node patches
// answered 1.5 s late: the CSI handler's unregister after B's failed
// NodeGetInfo (two API writes, the Node's slow) ends before the kubelet
// tells B its registration failed, so A's take-back, which follows B's
// "failed" at once, is registered after it and keeps the annotation.
func TestFailingSuccessorSlowAPI(t *testing.T) {
	w := newWorld(t, "failing-slow.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")

	slowNodePatches(t, w.kubelet, 1500*time.Millisecond)
	mark := time.Now()
	b := startInstance(t, "b", w.driver("b", true), w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRejected)
	w.eventually(registerWait, "A registered again after B's failure", func() bool {
		return w.h.count("register", "", mark) > 1 && w.endpoint() == "a" && a.r.Status().Stage == registrar.StageRegistered
	})
	t.Logf("A registered again %s after B started (Node patches 1.5 s late)", time.Since(mark).Round(10*time.Millisecond))
	w.keptRegistered(t, "a", true)
}

// TestPlainRemovedSlowAPI: the first rollout from a registrar without the
// mode. P (without the mode) registered the driver at <driver>-reg.sock; A
// (the mode) announced after it and holds the registration. P leaves: it
// unlinks its socket by name, and the CSI handler unregisters the driver by
// name, slowly (Node patches answered 1.5 s late). A announces again at
// once at P's path, no settle: the kubelet registers it only once P's
// deregistration ended (one operation per path), so the Node annotation and
// the CSINode entry are there at the end, and the driver is unregistered
// from the end of that deregistration until the next reconciler round
// registers A there.
func TestPlainRemovedSlowAPI(t *testing.T) {
	w := newWorld(t, "plain-removed.csi.test")
	p := startInstance(t, "p", w.driver("p", false), w.reg, "")
	waitStage(w, p, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "p")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")
	plain := filepath.Join(w.reg, w.name+"-reg.sock")

	slowNodePatches(t, w.kubelet, 1500*time.Millisecond)
	mark := time.Now()
	p.stop(t) // P unlinks its socket by name
	w.eventually(registerWait, "A registered at P's path", func() bool {
		st := a.r.Status()
		return w.h.count("register", "", mark) > 0 && st.SocketPath == plain && st.Stage == registrar.StageRegistered &&
			w.endpoint() == "a" && w.registeredNow(plain)
	})
	t.Logf("A registered at the plain path %s after P left (Node patches 1.5 s late)", time.Since(mark).Round(10*time.Millisecond))
	w.keptRegistered(t, "a", true)
	if n, all := a.log.count("announcing again at the removed plain socket's path"), a.log.count("decision=take-back"); n != 1 || all != 1 {
		t.Errorf("A took the registration back %d times, %d of them at the removed plain path; want once, there, at once (no settle)", all, n)
	}
	if n := w.h.count("deregister", "", mark); n != 1 {
		t.Errorf("the kubelet called DeRegisterPlugin %d times after P left, want 1 (P's socket)", n)
	}
	if g := gaps(w.writes()); g > 1 {
		t.Errorf("the CSINode lost the driver %d times, want at most 1 (P's exit)", g)
	}
	dereg, reg := w.h.firstAfter("deregister", mark), w.h.firstAfter("register", mark)
	if dereg.IsZero() || reg.Before(dereg) {
		t.Fatalf("want P's deregistration, then A's registration at the path: deregistered %v, registered %v\n%s", dereg, reg, w.h)
	}
	t.Logf("unregistered from the end of P's deregistration to the end of A's registration at its path (its Node patch 1.5 s late included): %s",
		reg.Sub(dereg).Round(10*time.Millisecond))
	if ks := w.pm.state(); len(ks.desiredOnly()) != 0 {
		t.Errorf("the kubelet holds desired-only paths: %v\n%s", ks.desiredOnly(), ks)
	}
	own := ownSockets(w, "pod-a")
	if len(own) != 0 {
		t.Errorf("A's earlier announcements %v are still there once the one at the plain path is confirmed", own)
	}
}

// keptRegistered waits settleRounds of the plugin manager (and, with
// opsEnded, until no kubelet operation on an announcement is pending), then
// checks that the driver kept its Node annotation and CSINode entry, and
// that the CSI handler dials endpoint.
func (w *world) keptRegistered(t *testing.T, endpoint string, opsEnded bool) {
	t.Helper()
	w.pm.waitRounds(t, settleRounds)
	if opsEnded {
		w.eventually(registerWait, "the kubelet's operations ended", func() bool {
			for _, n := range w.announcements() {
				if w.pm.operationPending(filepath.Join(w.reg, n)) {
					return false
				}
			}
			return true
		})
	}
	if !w.kubelet.nodeHasID(t, w.name) {
		t.Errorf("the Node annotation %s lost %s for good", nodeIDAnnotation, w.name)
	}
	if !w.kubelet.csiNodeHas(t, w.name) {
		t.Errorf("the CSINode lost %s for good", w.name)
	}
	if got := w.endpoint(); got != endpoint {
		t.Errorf("the CSI handler dials %q, want %s", got, endpoint)
	}
}
