package registrar_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/handoff"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// handoverNode is one node's directories for the handover tests: the
// driver sockets' directory (shared by every instance) and the kubelet's
// plugins_registry.
type handoverNode struct {
	csiDir, regDir string
}

const handoverDriver = "stub.csi.example.com"

func newHandoverNode(t *testing.T) handoverNode {
	d := shortDir(t)
	n := handoverNode{csiDir: filepath.Join(d, "csi"), regDir: filepath.Join(d, "reg")}
	for _, p := range []string{n.csiDir, n.regDir} {
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n handoverNode) regSock() string      { return filepath.Join(n.regDir, handoverDriver+"-reg.sock") }
func (n handoverNode) link() string         { return filepath.Join(n.csiDir, "csi-endpoint.sock") }
func (n handoverNode) sock(p string) string { return filepath.Join(n.csiDir, p+".sock") }
func (n handoverNode) rendezvous() string {
	return filepath.Join(n.csiDir, ".csi-registrar-handover.sock")
}

// linkTarget is the endpoint link's target, "" without one.
func (n handoverNode) linkTarget() string {
	t, _ := os.Readlink(n.link())
	return t
}

// pod is one instance of the node plugin: a driver and a registrar with
// the handover, on the driver socket named after the pod.
type pod struct {
	name   string
	r      *registrar.Registrar
	reg    running
	driver running
	logs   *logBuffer // its registrar's
}

func startPod(t *testing.T, n handoverNode, name string, opts ...func(*registrar.Options)) *pod {
	t.Helper()
	sock := n.sock(name)
	d, err := stubdriver.New(stubdriver.Options{Endpoint: "unix://" + sock, Name: handoverDriver, NodeID: "node-1",
		MaxVolumesPerNode: 7, Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{name: name, driver: start(t, d.Run), logs: &logBuffer{}}
	o := registrar.Options{
		CSIAddress: sock, KubeletRegistrationPath: sock, PluginRegistrationPath: n.regDir,
		RollingUpdate: podUID(name), Logger: testLogger(t, p.logs).With("pod", name),
	}
	for _, f := range opts {
		f(&o)
	}
	r, err := registrar.New(o)
	if err != nil {
		t.Fatal(err)
	}
	p.r, p.reg = r, start(t, r.Run)
	return p
}

// podUID makes a pod UID of the form the downward API gives.
func podUID(name string) string {
	const base = "00000000-0000-4000-8000-000000000000"
	return base[:len(base)-len(name)] + name
}

// handoverKubeletRegisters registers the driver as the kubelet does after a
// Create event, once p serves the registration socket (it publishes
// "waiting for kubelet" only while it holds a listening one), checks what
// it was told, and waits until p has taken the confirmation in: a pod that
// joins p before then is handed the registration unconfirmed (it would
// register again after Options.KubeletWait).
func handoverKubeletRegisters(t *testing.T, n handoverNode, p *pod) {
	t.Helper()
	awaitStatus(t, p.r, p.name+" serving the registration socket", stageIs(registrar.StageWaitingForKubelet))
	reg, err := registrartest.Register(context.Background(), n.regSock())
	if err != nil {
		t.Fatalf("registering through %s: %v", p.name, err)
	}
	if reg.Err != nil {
		t.Fatalf("registration rejected: %v", reg.Err)
	}
	if reg.Info.Endpoint != n.link() {
		t.Fatalf("GetInfo's endpoint is %s, want the link %s", reg.Info.Endpoint, n.link())
	}
	wantRegistered(t, p)
}

// registeredNode is a new node with one pod, "a", registered through the
// kubelet: where a rollout starts.
func registeredNode(t *testing.T) (handoverNode, *pod) {
	t.Helper()
	n := newHandoverNode(t)
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n, a)
	return n, a
}

func wantLink(t *testing.T, n handoverNode, p *pod) {
	t.Helper()
	awaitDir(t, n.csiDir, patience, "the endpoint link pointing at "+p.name, func() bool { return n.linkTarget() == p.name+".sock" })
}

func wantRegistered(t *testing.T, p *pod) {
	t.Helper()
	awaitStatus(t, p.r, p.name+" registered", stageIs(registrar.StageRegistered))
}

// wantNewestAgain waits, after the newer pods left (a rollout undone), until
// p holds the rendezvous again, which it logs. A pod started before that
// finds no rendezvous and the registration socket served, and stands by
// behind p as behind another registrar until p leaves.
func wantNewestAgain(t *testing.T, p *pod) {
	t.Helper()
	awaitLog(t, p.logs, p.name+" the newest instance again", logCount("the newer instances left: this one is the newest again", 1))
}

// TestHandoverRollout: a DaemonSet rolling with maxSurge 1 twice; the
// registration socket is the same file throughout, the endpoint follows
// the newest driver, and the last pod to leave removes both.
func TestHandoverRollout(t *testing.T) {
	n, a := registeredNode(t)
	wantLink(t, n, a)
	ino := inode(t, n.regSock())

	b := startPod(t, n, "b")
	wantRegistered(t, b)
	wantLink(t, n, b)
	if err := a.reg.stop(t); err != nil {
		t.Fatalf("a's registrar: %v", err)
	}
	if got := inode(t, n.regSock()); got != ino {
		t.Fatalf("the registration socket changed (inode %d, was %d): the kubelet would register again", got, ino)
	}
	if _, err := registrartest.GetInfoSocket(context.Background(), n.regSock()); err != nil {
		t.Fatalf("after a left, GetInfo: %v", err)
	}
	if _, err := registrartest.NodeGetInfo(context.Background(), n.link()); err != nil {
		t.Fatalf("after a left, NodeGetInfo through the link: %v", err)
	}

	c := startPod(t, n, "c")
	wantRegistered(t, c)
	wantLink(t, n, c)
	b.reg.stop(t)
	if got := inode(t, n.regSock()); got != ino {
		t.Fatalf("second rollout: the registration socket changed")
	}

	// Uninstall: the last one leaves, after its wait for a successor.
	if err := c.reg.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{n.regSock(), n.link()} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after the last instance left: %v", p, err)
		}
	}
}

// TestHandoverUndo: the new pod is deleted while the old one runs (kubectl
// rollout undo): the endpoint moves back, nothing is removed, and a later
// pod takes the registration from the old one.
func TestHandoverUndo(t *testing.T) {
	n, a := registeredNode(t)
	ino := inode(t, n.regSock())
	b := startPod(t, n, "b")
	wantLink(t, n, b)
	b.reg.stop(t)
	wantLink(t, n, a)
	if got := inode(t, n.regSock()); got != ino {
		t.Fatalf("undo: the registration socket changed")
	}
	wantRegistered(t, a)
	wantNewestAgain(t, a)
	c := startPod(t, n, "c")
	wantRegistered(t, c)
	wantLink(t, n, c)
	if got := inode(t, n.regSock()); got != ino {
		t.Fatalf("after the undo, a rollout changed the registration socket")
	}
}

// TestHandoverNewerDriverDies: the new pod's driver stops answering after
// the swap; the link goes back to the old pod's driver with no kubelet
// round, and forward again when the new driver is back.
func TestHandoverNewerDriverDies(t *testing.T) {
	n, a := registeredNode(t)
	b := startPod(t, n, "b")
	wantLink(t, n, b)
	b.driver.stop(t)
	wantLink(t, n, a)
	if _, err := registrartest.NodeGetInfo(context.Background(), n.link()); err != nil {
		t.Fatalf("after the fallback, NodeGetInfo through the link: %v", err)
	}
}

// TestHandoverFromForeignRegistrar: node-driver-registrar serves the plain
// path (the first rollout into the handover): the new pod is Ready without
// touching it, and binds the path once that registrar removed it.
func TestHandoverFromForeignRegistrar(t *testing.T) {
	n := newHandoverNode(t)
	foreign, err := net.Listen("unix", n.regSock())
	if err != nil {
		t.Fatal(err)
	}
	ino := inode(t, n.regSock())
	a := startPod(t, n, "a")
	awaitStatus(t, a.r, "a standing by as ready", func(st registrar.Status) bool {
		return st.Stage == registrar.StageStandingBy && st.Fallback
	})
	if got := inode(t, n.regSock()); got != ino {
		t.Fatal("the foreign registrar's socket was replaced")
	}
	foreign.Close() // unlinks, as node-driver-registrar does on SIGTERM
	handoverKubeletRegisters(t, n, a)
}

// TestHandoverReplacesDeadSocket: a socket nobody listens on (a reboot, a
// crash) is replaced, so the kubelet's Create gives it a new identity.
func TestHandoverReplacesDeadSocket(t *testing.T) {
	n := newHandoverNode(t)
	l, err := net.Listen("unix", n.regSock())
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ino := inode(t, n.regSock())
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n, a)
	if inode(t, n.regSock()) == ino {
		t.Fatal("the dead socket was not replaced")
	}
}

// TestHandoverReregister: Reregister (a CSINode lost) re-announces the one
// registration socket: a new file at the path, which every instance
// serves, and the kubelet registers the driver again.
func TestHandoverReregister(t *testing.T) {
	n, a := registeredNode(t)
	b := startPod(t, n, "b")
	wantRegistered(t, b)
	ino := inode(t, n.regSock())
	if err := b.r.Reregister("test: CSINode lost"); err != nil {
		t.Fatal(err)
	}
	if inode(t, n.regSock()) == ino {
		t.Fatal("Reregister left the same socket file: the kubelet would not register again")
	}
	handoverKubeletRegisters(t, n, b)
	wantRegistered(t, a) // confirmed through b
	// b leaves; a serves the new socket it received.
	b.reg.stop(t)
	if _, err := registrartest.GetInfoSocket(context.Background(), n.regSock()); err != nil {
		t.Fatalf("after b left, the re-announced socket does not answer: %v", err)
	}
}

// TestHandoverUninstall: every pod stops at once (the DaemonSet deleted):
// each learns the other stops too, and the socket and the link go.
func TestHandoverUninstall(t *testing.T) {
	n, a := registeredNode(t)
	b := startPod(t, n, "b")
	wantRegistered(t, b)
	wantLink(t, n, b)
	a.reg.cancel()
	b.reg.cancel()
	a.reg.stop(t)
	b.reg.stop(t)
	for _, p := range []string{n.regSock(), n.link()} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after every instance left: %v", p, err)
		}
	}
}

// TestHandoverRegistersAgainWhenUnheard: an instance that serves the
// registration socket and never hears from the kubelet on it (here no
// kubelet calls at all; on a node, a confirmation that reached an instance
// which had already passed its state on) registers again after
// Options.KubeletWait: a fresh socket at the path, which the kubelet calls.
func TestHandoverRegistersAgainWhenUnheard(t *testing.T) {
	n := newHandoverNode(t)
	a := startPod(t, n, "a", func(o *registrar.Options) { o.KubeletWait = registrar.MinKubeletWait })
	awaitStatus(t, a.r, "the registration socket", stageIs(registrar.StageWaitingForKubelet))
	ino := inode(t, n.regSock())
	// A new file renamed over the path: an event in the directory.
	awaitDir(t, n.regDir, registrar.MinKubeletWait+patience, "a new registration socket after the kubelet said nothing on it", func() bool {
		st, err := os.Lstat(n.regSock())
		return err == nil && st.Sys().(*syscall.Stat_t).Ino != ino
	})
	handoverKubeletRegisters(t, n, a)
}

// TestHandoverStaleVerdict: a peer's word that the kubelet confirmed the
// registration, sent before the peer received a re-announced socket (the
// two messages crossed), is about the socket replaced. The instance that
// re-announced keeps waiting for the kubelet on the new one instead of
// reporting a registration nobody confirmed there.
func TestHandoverStaleVerdict(t *testing.T) {
	n, a := registeredNode(t)
	peer, err := handoff.Dial(n.rendezvous())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	peer.SetDeadline(time.Now().Add(patience))
	// Join as a newer instance: a hands over its copy of the socket.
	if err := peer.Send(handoff.Message{Driver: "b.sock"}, nil); err != nil {
		t.Fatal(err)
	}
	old := recvSocket(t, peer, "a's offer")
	defer old.Close()
	if err := a.r.Reregister("test: CSINode lost"); err != nil {
		t.Fatal(err)
	}
	fresh := recvSocket(t, peer, "the re-announced socket")
	defer fresh.Close()
	if fresh.ID == old.ID {
		t.Fatalf("the re-announced socket has the old identity %v", old.ID)
	}
	// The peer's confirmation on the old socket, as if sent before the new
	// one arrived; then a Leaving, whose answer shows a handled both.
	if err := peer.Send(handoff.Message{Driver: "b.sock", Registered: true, About: old.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := peer.Send(handoff.Message{Driver: "b.sock", Leaving: true}, nil); err != nil {
		t.Fatal(err)
	}
	for {
		m, s, err := peer.Recv()
		if s != nil {
			s.Close()
		}
		if err != nil {
			t.Fatalf("waiting for a's answer to Leaving: %v", err)
		}
		if m.Staying {
			break
		}
	}
	if st := a.r.Status(); st.Stage != registrar.StageWaitingForKubelet {
		t.Fatalf("after a stale confirmation, a reports %q; want %q until the kubelet confirms the new socket", st, registrar.StageWaitingForKubelet)
	}
}

// recvSocket reads p's messages until one carries a registration socket.
func recvSocket(t *testing.T, p *handoff.Peer, what string) *handoff.Socket {
	t.Helper()
	for {
		_, s, err := p.Recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if s != nil {
			return s
		}
	}
}
