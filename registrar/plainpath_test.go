package registrar_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// The driver's plain socket (<driver>-reg.sock) unlinked by a registrar
// without the mode (node-driver-registrar, or csi-registrar without
// --rolling-update: the first rollout into the mode): the instance that
// holds the registration announces again at once at that path, as the plain
// registrar would re-create it; the kubelet's per-path ordering unregisters
// the removed socket before it registers ours there. No settle.

// plainRegistrar serves the driver's plain socket path as a registrar
// without the mode does: a listener without the handover service. It is
// unlinked by name by the returned function.
func plainRegistrar(t *testing.T, path string) (leave func()) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed := false
	leave = func() {
		if closed {
			return
		}
		closed = true
		ln.Close()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { ln.Close() })
	return leave
}

// removes counts the Remove events of name.
func (d *dirEvents) removes(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, ev := range d.evs {
		if filepath.Base(ev.Name) == name && ev.Has(fsnotify.Remove) {
			n++
		}
	}
	return n
}

// atPlainPath starts an instance beside a registrar without the mode at the
// driver's plain path, lets that registrar leave (unlinking its socket by
// name) and checks that the instance announced again at that path. It
// returns the instance, its first announcement and the plain path.
func atPlainPath(t *testing.T, e env, clk *registrar.FakeClock, pod string) (in instance, first, plain string) {
	t.Helper()
	plain = e.regSock(stubName)
	leave := plainRegistrar(t, plain)
	in = startInstance(t, e, clk, pod)
	first = announced(t, in, "")
	leave()
	if got := in.serving(t, first); got != plain {
		t.Fatalf("announced at %s, want %s", got, plain)
	}
	return in, first, plain
}

// registerAt registers the socket as the kubelet does and waits until the
// instance logs the confirmation.
func registerAt(t *testing.T, in instance, sock string) {
	t.Helper()
	if reg, err := registrartest.Register(t.Context(), sock); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	awaitStatus(t, in.r, "registered at "+sock, func(st registrar.Status) bool {
		return st.Stage == registrar.StageRegistered && st.SocketPath == sock
	})
}

// The plain registrar leaves: the instance announces at its path at once
// (no settle alarm is fired here), is confirmed there and retires its
// earlier announcement through a hidden name. An older instance standing
// by follows it there (the name carries no instance: it asks the socket)
// instead of taking it for a departure; a newer one that starts finds it
// there, and the holder retires for it without unregistering.
func TestRollingUpdatePlainRemovedAnnouncesAtItsPath(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	plain := e.regSock(stubName)
	leave := plainRegistrar(t, plain)

	o := startInstance(t, e, clk, "pod-o")
	announced(t, o, "")
	n := startInstance(t, e, clk, "pod-n")
	sockN := announced(t, n, "")
	awaitStatus(t, o.r, "the older instance standing by", stageIs(registrar.StageStandingBy))

	leave()
	if got := n.serving(t, sockN); got != plain {
		t.Fatalf("after the plain socket went, the newer instance announced at %s, want %s", got, plain)
	}
	registerAt(t, n, plain)
	events.sync(t, e.regDir)
	if events.removed(filepath.Base(sockN)) {
		t.Errorf("%s, registered, was removed by name: the kubelet would unregister the driver", filepath.Base(sockN))
	}
	if _, err := os.Lstat(sockN); !os.IsNotExist(err) {
		t.Errorf("the earlier announcement %s is still there once the one at the plain path is confirmed: %v", filepath.Base(sockN), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if _, err := o.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, `event="peer moved"`) }); err != nil {
		t.Fatalf("the older instance did not follow the newer one to the plain path: %v\n%s", err, o.logs.String())
	}
	if st := o.r.Status().Stage; st != registrar.StageStandingBy || strings.Contains(o.logs.String(), "decision=take-back") {
		t.Errorf("the older instance is at %v or took the registration back; the newer one only moved:\n%s", st, o.logs.String())
	}
	if strings.Contains(n.logs.String(), "path="+plain) && strings.Count(n.logs.String(), "outcome=serving path="+plain) != 1 {
		t.Errorf("the newer instance announced at the plain path more than once:\n%s", n.logs.String())
	}

	// A newer instance starts: it finds the holder at the plain path (it
	// waits for its state), announces, is confirmed; the holder, deleted,
	// retires without unregistering.
	y := startInstance(t, e, clk, "pod-y")
	sockY := announced(t, y, "")
	awaitStatus(t, n.r, "the holder standing by", stageIs(registrar.StageStandingBy))
	n.run.cancel()
	if err := returned(t, n.run, "pod-n"); err != nil {
		t.Fatal(err)
	}
	events.sync(t, e.regDir)
	if n := events.removes(filepath.Base(plain)); n != 1 {
		t.Errorf("the plain path was removed by name %d times, want 1 (the registrar without the mode): the holder unlinked it although %s was confirmed after it",
			n, filepath.Base(sockY))
	}
	if strings.Contains(y.logs.String(), "decision=take-back") {
		t.Errorf("the newest instance took the registration back although the holder retired for it:\n%s", y.logs.String())
	}
}

// Our own unlink of an announcement at the plain path (here: never asked,
// superseded by a later one) is not a plain registrar leaving: no second
// announcement there.
func TestRollingUpdatePlainPathOwnUnlinkIgnored(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	a, sockA, plain := atPlainPath(t, e, clk, "pod-a")
	// The kubelet never asks it: a new announcement after --kubelet-wait
	// replaces it, and the unasked one at the plain path is unlinked by name.
	clk.Fire(t, registrar.DefaultKubeletWait, patience)
	clk.Fire(t, time.Second, patience)
	third := a.serving(t, plain)
	for third == sockA {
		third = a.serving(t, plain)
	}
	events.sync(t, e.regDir)
	if n := events.removes(filepath.Base(plain)); n != 2 {
		t.Fatalf("the plain path was removed by name %d times, want 2 (the registrar without the mode, then our unasked announcement)", n)
	}
	registerAt(t, a, third)
	events.sync(t, e.regDir)
	if n := strings.Count(a.logs.String(), "outcome=serving path="+plain+" "); n != 1 {
		t.Errorf("announced %d times at the plain path, want 1 (our own unlink is no plain registrar leaving):\n%s", n, a.logs.String())
	}
	if _, err := os.Lstat(plain); !os.IsNotExist(err) {
		t.Errorf("the plain path is taken again: %v", err)
	}
}

// A rollback out of the mode to node-driver-registrar, which removes
// whatever is at its path as it starts and listens there: the instance
// holding the plain path does not re-create it (no fight), waits for the
// kubelet's deregistration, then finds the path taken and yields: no new
// announcement, the other file untouched.
func TestRollingUpdatePlainPathTakenBackByPlainRegistrar(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	a, _, plain := atPlainPath(t, e, clk, "pod-a")
	registerAt(t, a, plain)

	// node-driver-registrar starts: it removes our socket, then listens.
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	// Its decision is logged after it looked at the path: free then, so the
	// settle is armed (a file there already would make it yield at once, the
	// table's own-plain-replaced row).
	if _, err := a.logs.Wait(ctx, func(s string) bool {
		return strings.Contains(s, "not re-created there") && strings.Contains(s, `event="own socket removed"`)
	}); err != nil {
		t.Fatalf("the instance did not decide on its socket at the plain path going: %v", err)
	}
	plainRegistrar(t, plain)
	ino := inode(t, plain)
	clk.Fire(t, registrar.KubeletSettle, patience)
	awaitStatus(t, a.r, "yielded (standing by)", stageIs(registrar.StageStandingBy))
	if ino != inode(t, plain) {
		t.Errorf("the registrar without the mode's socket at %s was replaced", plain)
	}
	if n := strings.Count(a.logs.String(), "outcome=serving path="); n != 2 {
		t.Errorf("%d announcements, want 2 (no take-back once a registrar without the mode holds the path):\n%s", n, a.logs.String())
	}
	// It leaves holding nothing the kubelet asked: at once, nothing unlinked.
	a.run.cancel()
	if err := returned(t, a.run, "pod-a"); err != nil {
		t.Fatal(err)
	}
	if ino != inode(t, plain) {
		t.Errorf("the registrar without the mode's socket at %s was touched as the instance left", plain)
	}
}

// A rollback out of the mode to csi-registrar without it, while the
// instance holds the plain path: the registrar without the mode finds the
// path served and waits (socket conflict, retried with backoff); the
// instance, deleted with no successor in the mode, unlinks the path by
// name, and the registrar without the mode takes it at once (its Remove
// event; no backoff fired here), which the kubelet orders after the
// deregistration of the instance's socket there.
func TestRollingUpdatePlainPathHandedToPlainRegistrar(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	m, _, plain := atPlainPath(t, e, clk, "pod-m")
	registerAt(t, m, plain)

	startStubDriver(t, e, stubName)
	p, _ := startRegistrarOn(t, clk, e, nil, nil)
	awaitStatus(t, p, "the registrar without the mode waiting for the path", stageIs(registrar.StageSocketConflict))

	m.run.cancel()
	clk.Fire(t, registrar.SuccessorWait, patience)
	if err := returned(t, m.run, "the mode's instance"); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, p, "the registrar without the mode serving the path", stageIs(registrar.StageWaitingForKubelet))
	registerPlain(t, p, plain)
}
