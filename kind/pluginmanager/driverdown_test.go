package pluginmanager

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// startKillableDriver is startDriver whose kill stops serving and leaves the
// socket file, as a SIGKILLed driver container does (no file event: only
// the registrar's Probe notices), and whose restart serves a new socket at
// the path, as the restarted container does.
func startKillableDriver(t *testing.T, w *world, label string) (d *driver, kill, restart func()) {
	dir := filepath.Join(w.dir, label)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d = &driver{name: w.name, label: label, sock: filepath.Join(dir, "csi.sock")}
	w.drivers = append(w.drivers, d)
	serve := func() {
		ln, err := net.Listen("unix", d.sock)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		srv := grpc.NewServer()
		csi.RegisterIdentityServer(srv, d)
		csi.RegisterNodeServer(srv, d)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		d.srv = srv
	}
	serve()
	kill = func() { d.srv.Stop() }
	restart = func() {
		if err := os.Remove(d.sock); err != nil {
			t.Fatal(err)
		}
		serve()
	}
	return d, kill, restart
}

// The registrar's driverProbePeriod and driverStableWindow
// (registrar/rolldriver.go), and its default Probe timeout.
const (
	driverProbePeriod  = 2 * time.Second
	driverStableWindow = 10 * time.Second
)

// Scenario: B, newer, holds the registration; its driver dies (SIGKILL: the
// socket stays). B's registrar notices at its next Probe (every 2 s while
// another instance runs), publishes it, and A, which stands by, announces
// again at once: the CSI handler's endpoint returns to A without the
// kubelet unregistering the driver. B's driver restarts: B announces again
// only once it has been ready for the stable window (10 s), once.
//
// Covers rolldriver.go (Probe while another instance runs, driverDown
// published, the stable window) and nextStep's newer-driver-down,
// driver-down-no-claim and driver-stable rows. Without the take-back the
// endpoint stays on B's dead driver; without the window B takes it back at
// its first ready Probe.
func TestNewerDriverDiesAfterConfirmation(t *testing.T) {
	w := newWorld(t, "driverdown.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")

	bDrv, kill, restart := startKillableDriver(t, w, "b")
	b := startInstance(t, "b", bDrv, w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "b")
	waitStage(w, a, 5*time.Second, registrar.StageStandingBy)

	killed := time.Now()
	kill()
	w.waitEndpoint(20*time.Second, "a")
	t.Logf("the CSI handler's endpoint was back on A %s after B's driver died (Probe period %s, Probe timeout %s, kubelet period %s)",
		time.Since(killed).Round(10*time.Millisecond), driverProbePeriod, registrar.DefaultTimeout, kubeletPeriod)

	restarted := time.Now()
	restart()
	w.waitEndpoint(40*time.Second, "b")
	back := time.Since(restarted)
	t.Logf("the endpoint was back on B %s after its driver restarted (stable window %s)", back.Round(10*time.Millisecond), driverStableWindow)
	if back < driverStableWindow {
		t.Errorf("B took the registration back %s after its driver restarted, before the stable window (%s)", back, driverStableWindow)
	}
	waitStage(w, a, 5*time.Second, registrar.StageStandingBy)
	w.pm.waitRounds(t, cycleRounds)

	if n := w.h.count("deregister", "", time.Time{}); n != 0 {
		t.Errorf("the plugin manager called DeRegisterPlugin %d times, want 0", n)
	}
	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times, want never", g)
	}
	if n := w.h.count("register", bDrv.sock, restarted); n != 1 {
		t.Errorf("B was registered %d times since its driver restarted, want once:\n%s", n, w.h)
	}
	if n := w.h.count("register", w.drivers[0].sock, killed); n != 1 {
		t.Errorf("A was registered %d times since B's driver died, want once:\n%s", n, w.h)
	}
	if got := w.endpoint(); got != "b" {
		t.Errorf("the CSI handler dials %q at the end, want b", got)
	}
}
