package registrar_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// Behaviour 1: the registrar started before the driver waits on file events
// and registers once the driver's socket appears.
func rowDriverWaitIsEventDriven(t *testing.T) {
	e := newEnv(t)
	var logs logBuffer
	clk := registrar.NewFakeClock()
	r, _ := startRegistrarOn(t, clk, e, &logs, nil)
	wantStage(t, r, registrar.StageWaitingForDriver)
	// With no socket and no file event the wait must not wake up until the
	// reconcile period: a polling loop would have looked many times in the
	// 29 s that pass here (the progress log line comes every 10 s).
	const look = "looking at the driver socket"
	clk.WaitForTimer(t, registrar.ReconcilePeriod, patience)
	clk.Advance(registrar.ReconcilePeriod - time.Second)
	awaitLog(t, &logs, "a progress line", logAtLeast("still waiting for the CSI driver", 1))
	if n := strings.Count(logs.String(), look); n != 1 {
		t.Fatalf("the driver wait looked at the socket %d times without any file event, want 1", n)
	}
	// The reconcile period: one more look, for an event the watcher lost.
	clk.Advance(time.Second)
	awaitLog(t, &logs, "a look at the reconcile period", logCount(look, 2))
	if code, body := get(r, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while waiting for the driver = %d %q, want 200", code, body)
	}
	if code, body := get(r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for driver") {
		t.Errorf("/readyz while waiting for the driver = %d %q, want 503 naming the stage", code, body)
	}
	startStubDriver(t, e, stubName)
	awaitStatus(t, r, "registration socket after the driver appeared", serving(e.regSock(stubName)))
}

// Behaviour 1: --connection-timeout ends the wait with an error naming the
// address and the time waited.
func rowConnectionTimeout(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	r, run := startRegistrarOn(t, clk, e, nil, func(o *registrar.Options) { o.ConnectionTimeout = registrar.MinConnectionTimeout })
	clk.Fire(t, registrar.MinConnectionTimeout, patience)
	select {
	case <-run.done:
	case <-time.After(patience):
		t.Fatal("Run did not end at the connection timeout")
	}
	err := *run.err
	if err == nil || !strings.Contains(err.Error(), e.driverSock) || !strings.Contains(err.Error(), "waited 1s") ||
		!strings.Contains(err.Error(), "Options.ConnectionTimeout=1s") {
		t.Fatalf("Run = %v, want an error naming %s, the option and the time waited", err, e.driverSock)
	}
	if st := r.Status(); st.Stage != registrar.StageStopped || !strings.Contains(st.Detail, "did not answer") {
		t.Errorf("status after Run = %q, want stopped with the error", st)
	}
}

// An address that exists but is not a socket is an error, not a wait.
func rowDriverAddressNotASocket(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(e.driverSock, nil, 0o600)
	r, err := runUntilError(t, e, e.driverSock)
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Run = %v, want an immediate 'not a socket' error", err)
	}
	wantStage(t, r, registrar.StageStopped)
}

// Behaviour 1: with --driver-name the socket is created only once the driver
// answers Probe with ready.
func rowDriverNameWaitsForProbe(t *testing.T) {
	e := newEnv(t)
	d := &namedDriver{name: "ignored", notReady: true}
	serveNamedDriver(t, e.driverSock, d)
	r, _ := startRegistrar(t, e, nil, func(o *registrar.Options) { o.DriverName = "given.example.com" })
	awaitStatus(t, r, "a not-ready Probe seen", func(st registrar.Status) bool { return strings.Contains(st.Detail, "not ready") })
	if _, err := os.Lstat(e.regSock("given.example.com")); err == nil {
		t.Fatal("registration socket created before the driver was ready")
	}
	if st := r.Status().Stage; st != registrar.StageWaitingForDriver {
		t.Fatalf("stage %v while the driver is not ready, want waiting for driver", st)
	}
	d.setReady(true)
	awaitStatus(t, r, "socket for --driver-name", serving(e.regSock("given.example.com")))
	info, err := registrartest.GetInfoSocket(context.Background(), e.regSock("given.example.com"))
	if err != nil || info.Name != "given.example.com" {
		t.Fatalf("GetInfo = %v, %v; want the --driver-name", info, err)
	}
}

// Behaviour 5: a deleted registration socket is re-created, and the log
// says it was gone (not "not ours, left in place").
func rowDeletedSocketRecreated(t *testing.T) {
	s := startServed(t, nil)
	os.Remove(s.sock)
	awaitStatus(t, s.r, "socket re-created", servingNew(s.r, s.sock, "deleted", 1))
	l := s.logs.String()
	if !strings.Contains(l, "registration socket was deleted; re-creating it") || !strings.Contains(l, "outcome=gone") {
		t.Errorf("the log does not say the socket was gone and re-created:\n%s", l)
	}
	if strings.Contains(l, "outcome=kept") || strings.Contains(l, "not ours") {
		t.Errorf("the log says a deleted socket was somebody else's file, left in place:\n%s", l)
	}
	if _, err := registrartest.Register(context.Background(), s.sock); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, s.r, "registered on the new socket", stageIs(registrar.StageRegistered))
}

// Behaviour 5 with rule 3: a socket replaced by another live socket is not fought over.
func rowReplacedSocketNotFought(t *testing.T) {
	c := startClocked(t, func(o *registrar.Options) { o.RegistrationRetryMax = registrar.MinRegistrationRetryMax })
	r, clk, sock, logs, e := c.r, c.clk, c.sock, c.logs, c.e
	if other, err := sockfile.Listen(sock); err == nil {
		other.Close()
		t.Fatal("Listen on a live socket succeeded, want a conflict")
	}
	// Another process's live socket takes the path in one step (made beside
	// it, renamed over it), so the registrar cannot re-create its own first.
	tmp := filepath.Join(e.regDir, ".other.sock")
	other, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	other.SetUnlinkOnClose(false)
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := os.Rename(tmp, sock); err != nil {
		t.Fatal(err)
	}
	theirs := inode(t, sock)
	awaitStatus(t, r, "conflict", stageIs(registrar.StageSocketConflict))
	// Several retry rounds (1 s cap), each one a conflict again.
	for round := 2; round <= 5; round++ {
		clk.Fire(t, registrar.MinRegistrationRetryMax, patience)
		awaitLog(t, logs, fmt.Sprintf("conflict number %d", round), logAtLeast("outcome=conflict", round))
		if !answers(sock) || inode(t, sock) != theirs {
			t.Fatalf("round %d: the registrar replaced another process's live socket", round)
		}
	}
	if st := r.Status(); st.Stage != registrar.StageSocketConflict {
		t.Fatalf("stage %q, want socket conflict", st)
	}
}

// Behaviour 6: after Notify(false) the socket is re-created with a doubling
// backoff so that the kubelet tries again; success resets the backoff.
func rowRejectionRecreatesSocket(t *testing.T) {
	c := startClocked(t, nil)
	r, clk, sock, logs := c.r, c.clk, c.sock, c.logs
	ctx := context.Background()

	// A kubelet before 1.36: it never calls GetInfo again on a rejected socket.
	reject := func(n int, wantRetry time.Duration) {
		t.Helper()
		if err := registrartest.Reject(ctx, sock, "test rejection"); err != nil {
			t.Fatal(err)
		}
		// The stage is published after the log line: wait for both, or
		// the re-creation below could be taken for the earlier socket.
		l := awaitLog(t, logs, fmt.Sprintf("rejection %d logged", n), logCount("kubelet rejected the registration", n))
		if last := lastLine(l, "kubelet rejected the registration"); !strings.Contains(last, "retryIn="+wantRetry.String()) {
			t.Fatalf("rejection %d: %q, want a retry in %s", n, last, wantRetry)
		}
		wantStage(t, r, registrar.StageRejected)
		clk.Fire(t, wantRetry, patience)
		awaitStatus(t, r, "socket re-created after the rejection", servingNew(r, sock, "rejected", n))
	}
	reject(1, 3*time.Second) // the backoff's 1 s, at least kubeletRetryProbe while the kubelet's kind is unknown
	if k := r.Status().KubeletRetry; k != registrar.KubeletRetryNever {
		t.Errorf("kubelet retry inferred %v after a re-creation no GetInfo preceded, want never", k)
	}
	reject(2, 2*time.Second)
	if _, m := get(r, "/metrics"); !strings.Contains(m, `csi_registrar_socket_creations_total{reason="rejected"} 2`) {
		t.Errorf("metrics do not count two re-creations after rejections:\n%s", m)
	}
	if err := registrartest.NotifySocket(ctx, sock, true, ""); err != nil {
		t.Fatal(err)
	}
	wantStage(t, r, registrar.StageRegistered)
	reject(3, time.Second) // reset after success
	if n := strings.Count(logs.String(), "kubelet did not retry on the same socket"); n != 1 {
		t.Errorf("the inferred kubelet behaviour was logged %d times, want once", n)
	}
	if m := metric(r); !strings.Contains(m, `csi_registrar_kubelet_retry{mode="never"} 1`) {
		t.Errorf("metrics do not show the inferred kubelet behaviour:\n%s", m)
	}
}

func lastLine(s, containing string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], containing) {
			return lines[i]
		}
	}
	return ""
}

// Behaviour 7: no GetInfo within KubeletWait → the socket is re-created.
func rowKubeletSilenceRecreatesSocket(t *testing.T) {
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	clk := registrar.NewFakeClock()
	r, _ := startRegistrarOn(t, clk, e, nil, func(o *registrar.Options) { o.KubeletWait = registrar.MinKubeletWait })
	// (The driver wait's progress timer has the same 10 s: wait for the socket.)
	sock := e.regSock(stubName)
	awaitStatus(t, r, "socket", serving(sock))
	clk.Fire(t, registrar.MinKubeletWait, patience)
	awaitStatus(t, r, "silence noticed", func(st registrar.Status) bool {
		return strings.Contains(st.Detail, "no GetInfo from the kubelet for 10s")
	})
	clk.Fire(t, time.Second, patience)
	awaitStatus(t, r, "a re-creation for kubelet silence", servingNew(r, sock, "kubelet-silent", 1))
	// A GetInfo stops the clock: no further silent re-creation.
	if _, err := registrartest.Register(context.Background(), sock); err != nil {
		t.Fatal(err)
	}
	wantStage(t, r, registrar.StageRegistered)
	clk.Advance(time.Hour)
	// A reconcile tick is the only timer left; once it ran, nothing changed.
	clk.WaitForTimer(t, registrar.ReconcilePeriod, patience)
	if st := r.Status(); st.Stage != registrar.StageRegistered ||
		strings.Contains(metric(r), `csi_registrar_socket_creations_total{reason="kubelet-silent"} 2`) {
		t.Fatalf("stage %s after registration and an hour, want it to stay registered", st)
	}
}

// startThenRenameDriver runs a registrar whose driver, named
// one.example.com, exits once the registrar serves its socket and comes
// back under name.
func startThenRenameDriver(t *testing.T, name string) (env, *registrar.Registrar, running) {
	t.Helper()
	e := newEnv(t)
	stop := serveNamedDriver(t, e.driverSock, &namedDriver{name: "one.example.com"})
	r, run := startRegistrar(t, e, nil, nil)
	awaitStatus(t, r, "socket for one", serving(e.regSock("one.example.com")))
	stop()
	serveNamedDriver(t, e.driverSock, &namedDriver{name: name})
	return e, r, run
}

// Behaviour 8: the driver comes back under another name → the old socket
// goes, the new name is registered.
func rowDriverRenamed(t *testing.T) {
	e, r, _ := startThenRenameDriver(t, "two.example.com")
	awaitStatus(t, r, "socket for two", serving(e.regSock("two.example.com")))
	if _, err := os.Lstat(e.regSock("one.example.com")); err == nil {
		t.Fatal("the old name's socket is still there")
	}
	if got := r.Status().DriverName; got != "two.example.com" {
		t.Fatalf("status driver name %q", got)
	}
	wantStage(t, r, registrar.StageWaitingForKubelet)
}

// Behaviour 8 with rule 2: a driver that comes back with an invalid name ends
// Run with a validation error, and the old socket is removed.
func rowDriverRenamedInvalid(t *testing.T) {
	e, r, run := startThenRenameDriver(t, "../../evil")
	select {
	case <-run.done:
	case <-time.After(patience):
		t.Fatal("Run did not end on an invalid name")
	}
	if err := *run.err; !csiplugin.IsValidationError(err) {
		t.Fatalf("Run = %v, want a validation error", err)
	}
	if ents, _ := os.ReadDir(e.regDir); len(ents) != 0 {
		t.Fatalf("registration dir not empty after a fatal error: %v", ents)
	}
	wantStage(t, r, registrar.StageStopped)
}

// Behaviour 9: /readyz follows the driver's Probe; /healthz fails once the
// control loop is gone.
func rowHealthFollowsDriverAndLoop(t *testing.T) {
	e := newEnv(t)
	d := &namedDriver{name: stubName}
	stop := serveNamedDriver(t, e.driverSock, d)
	var logs logBuffer
	r, run := startRegistrar(t, e, &logs, nil)
	sock := e.regSock(stubName)
	awaitStatus(t, r, "socket", serving(sock))
	registerNow(t, r, sock)
	if code, body := get(r, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz registered, with the driver answering = %d %q, want 200", code, body)
	}
	stop()
	code, body := get(r, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "Probe") {
		t.Fatalf("/readyz with the driver gone = %d %q, want 503 naming Probe", code, body)
	}
	// driver_reachable has one writer, the control loop, which sees the
	// driver's socket go, and logs it after it wrote the metric.
	awaitLog(t, &logs, "the outage logged", logCount("driver stopped answering", 1))
	if m := metric(r); !strings.Contains(m, "csi_registrar_driver_reachable 0\n") {
		t.Fatalf("driver_reachable not 0 with the driver gone:\n%s", m)
	}
	serveNamedDriver(t, e.driverSock, d)
	// The loop logs the driver's return once its name was asked again on the
	// new socket: the client's connection is up, /readyz's Probe goes through.
	awaitLog(t, &logs, "the return logged", logCount("driver answers again", 1))
	if code, body := get(r, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the driver back = %d %q, want 200", code, body)
	}
	if code, _ := get(r, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d while running", code)
	}
	run.stop(t)
	if code, _ := get(r, "/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz = %d after the control loop ended, want 503", code)
	}
}
