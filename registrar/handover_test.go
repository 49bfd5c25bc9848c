package registrar_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar"
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
}

func startPod(t *testing.T, n handoverNode, name string) *pod {
	t.Helper()
	sock := n.sock(name)
	d, err := stubdriver.New(stubdriver.Options{Endpoint: "unix://" + sock, Name: handoverDriver, NodeID: "node-1",
		MaxVolumesPerNode: 7, Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{name: name, driver: start(t, d.Run)}
	r, err := registrar.New(registrar.Options{
		CSIAddress: sock, KubeletRegistrationPath: sock, PluginRegistrationPath: n.regDir,
		RollingUpdate: podUID(name), Logger: testLogger(t, nil).With("pod", name),
	})
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

// kubeletRegisters registers the driver as the kubelet does after a
// Create event, and checks what it was told.
func handoverKubeletRegisters(t *testing.T, n handoverNode) {
	t.Helper()
	var reg *registrartest.Registration
	eventually(t, "the registration socket answers", func() bool {
		var err error
		reg, err = registrartest.Register(context.Background(), n.regSock())
		return err == nil
	})
	if reg.Err != nil {
		t.Fatalf("registration rejected: %v", reg.Err)
	}
	if reg.Info.Endpoint != n.link() {
		t.Fatalf("GetInfo's endpoint is %s, want the link %s", reg.Info.Endpoint, n.link())
	}
}

func wantLink(t *testing.T, n handoverNode, p *pod) {
	t.Helper()
	eventually(t, "the endpoint link points at "+p.name, func() bool { return n.linkTarget() == p.name+".sock" })
}

func wantRegistered(t *testing.T, p *pod) {
	t.Helper()
	eventually(t, p.name+" registered", func() bool { return p.r.Status().Stage == registrar.StageRegistered })
}

// TestHandoverRollout: a DaemonSet rolling with maxSurge 1 twice; the
// registration socket is the same file throughout, the endpoint follows
// the newest driver, and the last pod to leave removes both.
func TestHandoverRollout(t *testing.T) {
	n := newHandoverNode(t)
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n)
	wantRegistered(t, a)
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
	n := newHandoverNode(t)
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n)
	ino := inode(t, n.regSock())
	b := startPod(t, n, "b")
	wantLink(t, n, b)
	b.reg.stop(t)
	wantLink(t, n, a)
	if got := inode(t, n.regSock()); got != ino {
		t.Fatalf("undo: the registration socket changed")
	}
	wantRegistered(t, a)
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
	n := newHandoverNode(t)
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n)
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
	eventually(t, "a standing by as ready", func() bool {
		st := a.r.Status()
		return st.Stage == registrar.StageStandingBy && st.Fallback
	})
	if got := inode(t, n.regSock()); got != ino {
		t.Fatal("the foreign registrar's socket was replaced")
	}
	foreign.Close() // unlinks, as node-driver-registrar does on SIGTERM
	handoverKubeletRegisters(t, n)
	wantRegistered(t, a)
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
	handoverKubeletRegisters(t, n)
	wantRegistered(t, a)
	if inode(t, n.regSock()) == ino {
		t.Fatal("the dead socket was not replaced")
	}
}

// TestHandoverReregister: Reregister (a CSINode lost) re-announces the one
// registration socket: a new file at the path, which every instance
// serves, and the kubelet registers the driver again.
func TestHandoverReregister(t *testing.T) {
	n := newHandoverNode(t)
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n)
	wantRegistered(t, a)
	b := startPod(t, n, "b")
	wantRegistered(t, b)
	ino := inode(t, n.regSock())
	if err := b.r.Reregister("test: CSINode lost"); err != nil {
		t.Fatal(err)
	}
	if inode(t, n.regSock()) == ino {
		t.Fatal("Reregister left the same socket file: the kubelet would not register again")
	}
	handoverKubeletRegisters(t, n)
	wantRegistered(t, b)
	eventually(t, "a confirmed through b", func() bool { return a.r.Status().Stage == registrar.StageRegistered })
	// b leaves; a serves the new socket it received.
	b.reg.stop(t)
	if _, err := registrartest.GetInfoSocket(context.Background(), n.regSock()); err != nil {
		t.Fatalf("after b left, the re-announced socket does not answer: %v", err)
	}
}

// TestHandoverUninstall: every pod stops at once (the DaemonSet deleted):
// each learns the other stops too, and the socket and the link go.
func TestHandoverUninstall(t *testing.T) {
	n := newHandoverNode(t)
	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n)
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
