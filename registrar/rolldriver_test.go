package registrar_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// serveKillable serves d on path as serveNamedDriver does, but kill stops
// the gRPC server and leaves the socket file, as a SIGKILLed driver does:
// no file event tells the registrar, only its Probe.
func serveKillable(t *testing.T, path string, d *namedDriver) (kill func()) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	stopped := false
	kill = func() {
		if !stopped {
			stopped = true
			srv.Stop()
			<-done
		}
	}
	t.Cleanup(func() { kill(); os.Remove(path) })
	return kill
}

// readyFallback checks /readyz of an instance standing by: 200 saying it
// is ready to take the registration back when want (it is a fallback:
// confirmed, its driver ready), else 503 saying it stands by.
func readyFallback(t *testing.T, in instance, want bool) {
	t.Helper()
	const fallback = "standing by (ready to take the registration back)"
	if want {
		awaitStatus(t, in.r, "the instance standing by as a fallback", func(st registrar.Status) bool {
			return st.Stage == registrar.StageStandingBy && st.Fallback
		})
	}
	code, body := get(in.r, "/readyz")
	switch {
	case want && (code != http.StatusOK || !strings.HasPrefix(body, fallback)):
		t.Errorf("/readyz of the instance standing by, its driver ready = %d %q, want 200 %q", code, body, fallback)
	case !want && (code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "standing by: ")):
		t.Errorf("/readyz of the instance standing by, its driver not ready for the stable window = %d %q, want 503 \"standing by: ...\"", code, body)
	}
}

// waitLog waits until the instance's log contains s.
func waitLog(t *testing.T, in instance, s, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if _, err := in.logs.Wait(ctx, func(l string) bool { return strings.Contains(l, s) }); err != nil {
		t.Fatalf("%s: no %q in its log: %v", what, s, err)
	}
}

// knows waits until the instance got a state from the announcement socket
// sock: a watch that has not (it waits up to 2 s on the clock for it) would
// take a move of the clock by a Probe period for a dead socket.
func knows(t *testing.T, in instance, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	want := "socket=" + filepath.Base(sock) + "\n"
	if _, err := in.logs.Wait(ctx, func(s string) bool {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, `msg="peer state" `) && strings.Contains(l+"\n", want) {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no state from %s: %v", filepath.Base(sock), err)
	}
}

// A newer instance whose driver dies after the kubelet confirmed it: the
// older instance, which stands by, takes the registration back within one
// Probe period on the clock (plus the Probe's timeout), without the settle
// (the kubelet unregistered nothing); the newer one claims it again only
// once its driver has been ready for the stable window, and then once.
func TestRollingUpdateNewerDriverFailsAfterConfirmation(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)

	a := startInstance(t, e, clk, "pod-a")
	sockA := announced(t, a, "")

	drvPath := filepath.Join(filepath.Dir(e.driverSock), "pod-b.sock")
	drvB := &namedDriver{name: stubName}
	kill := serveKillable(t, drvPath, drvB)
	clk.Advance(time.Millisecond)
	b := startInstanceRegistrar(t, e, clk, "pod-b")
	sockB := announced(t, b, "")
	awaitStatus(t, a.r, "the old instance standing by", stageIs(registrar.StageStandingBy))
	// Its driver ready, the older instance is a usable fallback: Ready, so
	// that the DaemonSet keeps its pod beside the new one.
	readyFallback(t, a, true)

	// The newer driver dies; its socket stays. One Probe period later the
	// newer instance knows (its Probe fails within Options.Timeout, real
	// time) and publishes it; the older one announces at once.
	killed := time.Now()
	kill()
	clk.Advance(registrar.DriverProbePeriod)
	if _, err := registrar.WaitInstanceState(t.Context(), sockB, func(st registrar.InstanceState) bool { return st.DriverDown }); err != nil {
		t.Fatalf("the newer instance did not publish that its driver is down: %v", err)
	}
	sockA2 := announced(t, a, sockA)
	t.Logf("the older instance was confirmed again %s (real time) after the newer driver died, the clock moved %s",
		time.Since(killed).Round(time.Millisecond), registrar.DriverProbePeriod)
	knows(t, b, sockA2)
	waitLog(t, a, `why="newer instance `, "the older instance's take-back")
	// The newer one no longer holds it: /readyz says so until it claims it again.
	awaitStatus(t, b.r, "the newer instance standing by behind the older one", stageIs(registrar.StageStandingBy))
	waitLog(t, b, "decision=driver-down", "the newer instance")
	readyFallback(t, b, false)

	// The driver comes back (a restarted container: a new socket at the
	// path). The newer instance does not claim the registration before the
	// stable window.
	if err := os.Remove(drvPath); err != nil {
		t.Fatal(err)
	}
	serveNamedDriver(t, drvPath, drvB)
	waitLog(t, b, "driver came back under the same name", "the newer instance")
	clk.Advance(registrar.DriverProbePeriod)
	waitLog(t, b, "the driver answers Probe ready again", "the newer instance")
	if got := b.r.Status().SocketPath; got != sockB {
		t.Errorf("the newer instance announced %s before its driver was ready for the stable window", got)
	}
	readyFallback(t, b, false) // recovering: not Ready before the window
	clk.Advance(registrar.DriverStableWindow)
	sockB2 := announced(t, b, sockB)
	knows(t, a, sockB2)
	awaitStatus(t, a.r, "the old instance standing by again", stageIs(registrar.StageStandingBy))
	readyFallback(t, a, true)

	// Once: a few more Probe periods change nothing.
	for range 3 {
		clk.Advance(registrar.DriverProbePeriod)
	}
	awaitStatus(t, b.r, "the newer instance registered", stageIs(registrar.StageRegistered))
	if got := b.r.Status().SocketPath; got != sockB2 {
		t.Errorf("the newer instance announced again after %s: %s", filepath.Base(sockB2), got)
	}
	if got := a.r.Status().SocketPath; got != sockA2 {
		t.Errorf("the older instance announced again after %s: %s", filepath.Base(sockA2), got)
	}
	for _, c := range []struct {
		in   instance
		want string
	}{
		{a, `csi_registrar_rolling_update_decisions_total{decision="take-back"} 1`},
		{b, `csi_registrar_rolling_update_decisions_total{decision="take-back"} 1`},
		{b, `csi_registrar_rolling_update_decisions_total{decision="driver-down"} 1`},
	} {
		if m := metric(c.in.r); !strings.Contains(m, c.want) {
			t.Errorf("want %s:\n%s", c.want, m)
		}
	}
	events.sync(t, e.regDir)
	for _, s := range []string{sockA, sockB, sockA2, sockB2} {
		if events.removed(filepath.Base(s)) {
			t.Errorf("%s was removed by name: the kubelet would unregister the driver", filepath.Base(s))
		}
	}
}

// A newer instance announces only once its driver answers Probe ready while
// an older one holds the registration; a driver that then says not ready
// hands the registration back; one that is ready again for less than the
// stable window does not take it: no ping-pong.
func TestRollingUpdateNewerDriverNotReady(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	a := startInstance(t, e, clk, "pod-a")
	sockA := announced(t, a, "")

	drvPath := filepath.Join(filepath.Dir(e.driverSock), "pod-b.sock")
	drvB := &namedDriver{name: stubName}
	drvB.setReady(false)
	serveNamedDriver(t, drvPath, drvB)
	clk.Advance(time.Millisecond)
	b := startInstanceRegistrar(t, e, clk, "pod-b")
	// probeRound moves the clock by one Probe period once the newer
	// instance acted on its last Probe (it armed the next one before it
	// asked), and waits until it acted on the next one.
	probeRound := func() {
		t.Helper()
		n := strings.Count(b.logs.String(), `msg="driver health"`)
		clk.Advance(registrar.DriverProbePeriod)
		ctx, cancel := context.WithTimeout(t.Context(), patience)
		defer cancel()
		if _, err := b.logs.Wait(ctx, func(s string) bool { return strings.Count(s, `msg="driver health"`) > n }); err != nil {
			t.Fatalf("the newer instance did not ask its driver Probe: %v", err)
		}
	}
	waitLog(t, b, "no claim on the registration while another instance may hold it", "the newer instance, its driver not ready")
	waitLog(t, b, `msg="driver health"`, "the newer instance's first Probe")
	probeRound()
	drvB.setReady(true)
	probeRound()
	sockB := announced(t, b, "")
	if n := strings.Count(b.logs.String(), "decision=announce "); n != 1 {
		t.Errorf("the newer instance announced %d times, want once (only once its driver was ready)", n)
	}
	awaitStatus(t, a.r, "the old instance standing by", stageIs(registrar.StageStandingBy))

	// Not ready after the confirmation: the older instance takes it back.
	drvB.setReady(false)
	probeRound()
	sockA2 := announced(t, a, sockA)
	knows(t, b, sockA2)
	waitLog(t, b, "decision=driver-down", "the newer instance")

	// Ready, then not ready again within the stable window, then ready:
	// only a whole window lets it claim.
	drvB.setReady(true)
	probeRound()
	waitLog(t, b, "the driver answers Probe ready again", "the newer instance")
	drvB.setReady(false)
	probeRound()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if _, err := b.logs.Wait(ctx, func(s string) bool { return strings.Count(s, "decision=driver-down") == 2 }); err != nil {
		t.Fatalf("the newer instance did not see its driver down again: %v", err)
	}
	drvB.setReady(true)
	probeRound()
	if _, err := b.logs.Wait(ctx, func(s string) bool { return strings.Count(s, "the driver answers Probe ready again") == 2 }); err != nil {
		t.Fatalf("the newer instance did not see its driver ready again: %v", err)
	}
	left := clk.WaitForTimer(t, registrar.DriverStableWindow, patience)
	clk.Advance(left - time.Millisecond)
	if got := b.r.Status().SocketPath; got != sockB {
		t.Errorf("the newer instance announced %s before its driver was ready for a whole stable window", got)
	}
	clk.Advance(time.Millisecond)
	announced(t, b, sockB)
	awaitStatus(t, a.r, "the old instance standing by again", stageIs(registrar.StageStandingBy))
	if got := a.r.Status().SocketPath; got != sockA2 {
		t.Errorf("the older instance announced again after %s: %s", filepath.Base(sockA2), got)
	}
	if n := strings.Count(b.logs.String(), "decision=take-back "); n != 1 {
		t.Errorf("the newer instance took the registration back %d times, want once", n)
	}
}
