package registrar_test

// Tests of the control loop's state machine (loop.go, driverevents.go, socketevents.go) that need the fake
// clock: the kubelet's two retry behaviours, a GetInfo never followed by a
// Notify, the reconcile tick, watcher errors, driver outages, Run's lifecycle.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// Issue 12 item 4 (kubernetes/kubernetes#138170): the kubelet calls GetInfo
// and hangs up without NotifyRegistrationStatus. After KubeletWait the
// socket is re-created with the usual backoff; /readyz says what is awaited.
func rowGetInfoWithoutNotifyRecreatesSocket(t *testing.T) {
	c := startClocked(t, nil)
	r, clk, sock := c.r, c.clk, c.sock
	ctx := context.Background()
	if _, err := registrartest.GetInfoSocket(ctx, sock); err != nil { // GetInfo, then hang up
		t.Fatal(err)
	}
	readyzSays := func(what, want string) {
		t.Helper()
		awaitStatus(t, r, what, func(st registrar.Status) bool { return strings.Contains(st.String(), want) })
		if code, body := get(r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
			t.Errorf("/readyz = %d %q, want 503 with %q", code, body, want)
		}
	}
	readyzSays("GetInfo noticed", "waiting for kubelet: GetInfo answered, waiting for the kubelet's NotifyRegistrationStatus")
	clk.Fire(t, registrar.DefaultKubeletWait, patience)
	readyzSays("/readyz naming the missing Notify", "waiting for kubelet: GetInfo answered, no NotifyRegistrationStatus for 2m")
	clk.Fire(t, time.Second, patience) // the first backoff step
	awaitStatus(t, r, "a new socket", func(st registrar.Status) bool {
		return st.Detail == "socket created, no GetInfo from the kubelet yet" && servingNew(r, sock, "no-notify", 1)(st)
	})
	registerNow(t, r, sock)
}

// Issue 12 item 3: a kubelet ≥ 1.36 retries a failed registration on the same
// socket (500 ms, doubling), before the registrar's own re-creation (1 s):
// the registrar infers it, logs it once, keeps the socket after later
// rejections, and re-creates it only when that kubelet stays silent longer
// than its maximum backoff plus margin.
func rowKubeletThatRetriesKeepsSocket(t *testing.T) {
	c := startClocked(t, nil)
	r, clk, sock, logs := c.r, c.clk, c.sock, c.logs
	ctx := context.Background()
	const why = "node label topology.stub.csi.example.com/zone has another value"
	rejections := 0
	reject := func() {
		t.Helper()
		if err := registrartest.Reject(ctx, sock, why); err != nil {
			t.Fatal(err)
		}
		rejections++
		awaitLog(t, logs, fmt.Sprintf("rejection %d handled", rejections), logCount("kubelet rejected the registration", rejections))
	}
	reject()
	if k := r.Status().KubeletRetry; k != registrar.KubeletRetryUnknown {
		t.Fatalf("kubelet retry %v after one rejection, want unknown", k)
	}
	// The kubelet's retry (its 500 ms) comes before the registrar's 1 s.
	reject()
	// The rejection's log line comes before its status: wait for the status.
	awaitStatus(t, r, "rejected, with the kubelet's error and that the kubelet retries by itself", func(st registrar.Status) bool {
		return st.KubeletRetry == registrar.KubeletRetryItself && st.Stage == registrar.StageRejected &&
			strings.Contains(st.Detail, why) && strings.Contains(st.Detail, "retries by itself")
	})
	// The kubelet keeps retrying (1 s, 2 s, …): the socket stays.
	clk.WaitForTimer(t, registrar.KubeletRetrySilence, patience)
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, time.Minute} {
		clk.Advance(backoff)
		reject()
	}
	clk.WaitForTimer(t, registrar.KubeletRetrySilence, patience)
	clk.Advance(registrar.KubeletRetrySilence - time.Second)
	if code, body := get(r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "retries by itself") {
		t.Errorf("/readyz = %d %q, want 503 saying the kubelet retries by itself", code, body)
	}
	if m := metric(r); !strings.Contains(m, `csi_registrar_socket_creations_total{reason="rejected"} 0`) || !strings.Contains(m, `csi_registrar_kubelet_retry{mode="itself"} 1`) {
		t.Errorf("the socket was re-created after a rejection by a retrying kubelet, or the mode is not shown:\n%s", m)
	}
	// The kubelet's next retry succeeds.
	registerNow(t, r, sock)

	// Rejected again, and then the kubelet stays silent: a new socket.
	reject()
	clk.Fire(t, registrar.KubeletRetrySilence, patience)
	awaitStatus(t, r, "silence noticed", func(st registrar.Status) bool {
		return strings.Contains(st.Detail, "the kubelet stopped retrying for 2m30s")
	})
	clk.Fire(t, time.Second, patience)
	awaitStatus(t, r, "re-created after the silence", servingNew(r, sock, "kubelet-silent", 1))
	if n := strings.Count(logs.String(), "kubelet retries registration by itself: keeping the socket"); n != 1 {
		t.Errorf("the inference was logged %d times, want once", n)
	}
	if k := r.Status().KubeletRetry; k != registrar.KubeletRetryItself {
		t.Errorf("kubelet retry %v after a re-creation, want it kept: itself", k)
	}
}

// startWatched starts a served registrar on a fake clock with opts
// adjusted, whose file watcher the test holds (served.w).
func startWatched(t *testing.T, adjust func(*registrar.Options)) served {
	t.Helper()
	watchers := make(chan *fsnotify.Watcher, 1)
	c := startServedOn(t, registrar.NewFakeClock(), adjust, func(r *registrar.Registrar) {
		r.OnWatcher(func(w *fsnotify.Watcher) { watchers <- w })
	})
	select {
	case c.w = <-watchers:
	case <-time.After(patience):
		t.Fatal("Run created no file watcher")
	}
	return c
}

// registerAndLoseEvents registers, then makes the registrar's watcher lose
// the registration directory's events, as an inotify queue overflow does,
// and deletes the socket: /readyz still says ready, wrongly.
func registerAndLoseEvents(t *testing.T, c served) {
	t.Helper()
	registerNow(t, c.r, c.sock)
	if code, body := get(c.r, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz registered = %d %q, want 200", code, body)
	}
	if err := c.w.Remove(c.e.regDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(c.sock); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(c.r, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d before the reconcile; the test needs the event to be lost", code)
	}
}

// Issue 13 "nothing reconciles": a deletion whose event was lost is found
// by the reconcile tick and handled as the event: a new socket, /readyz 503.
func rowReconcileFindsMissedDelete(t *testing.T) {
	c := startWatched(t, nil)
	registerAndLoseEvents(t, c)
	c.clk.Fire(t, registrar.ReconcilePeriod, patience)
	awaitStatus(t, c.r, "socket re-created by the reconcile", servingNew(c.r, c.sock, "deleted", 1))
	if code, body := get(c.r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for kubelet") {
		t.Errorf("/readyz after the reconcile = %d %q, want 503 waiting for kubelet", code, body)
	}
}

// Issue 13: a file watcher error (e.g. fsnotify.ErrEventOverflow, which the
// kernel's inotify queue limit causes and a test cannot) triggers a
// reconcile at once instead of being logged and dropped.
func rowWatcherErrorReconciles(t *testing.T) {
	c := startWatched(t, nil)
	registerAndLoseEvents(t, c)
	c.w.Errors <- fsnotify.ErrEventOverflow // no clock advance: only the error can trigger it
	awaitStatus(t, c.r, "socket re-created after the watcher error", servingNew(c.r, c.sock, "deleted", 1))
	if !strings.Contains(c.logs.String(), "file watcher error; reconciling now") {
		t.Errorf("the watcher error is not logged as a reconcile:\n%s", c.logs.String())
	}
}

// Issue 13: the driver stopping and answering again are logged once each,
// with driver, socket and outcome: a driver that hangs (Probe, found by the
// reconcile) and one that exits (its socket goes, an event).
func rowDriverOutageLogged(t *testing.T) {
	e := newEnv(t)
	var logs logBuffer
	d := &namedDriver{name: stubName}
	stop := serveNamedDriver(t, e.driverSock, d)
	clk := registrar.NewFakeClock()
	r, _ := startRegistrarOn(t, clk, e, &logs, quietKubelet)
	sock := e.regSock(stubName)
	awaitStatus(t, r, "registration socket", serving(sock))
	down := func(n int) {
		t.Helper()
		l := lastLine(awaitLog(t, &logs, fmt.Sprintf("outage %d logged", n), logCount("driver stopped answering", n)), "driver stopped answering")
		if !strings.Contains(l, "driver="+stubName+" socket="+sock) || !strings.Contains(l, "outcome=unreachable") {
			t.Errorf("outage %d logged as %q, want the driver, the socket and outcome=unreachable", n, l)
		}
	}
	up := func(n int) {
		t.Helper()
		l := lastLine(awaitLog(t, &logs, fmt.Sprintf("recovery %d logged", n), logCount("driver answers again", n)), "driver answers again")
		if !strings.Contains(l, "outcome=reachable") {
			t.Errorf("recovery %d logged as %q, want outcome=reachable", n, l)
		}
	}
	d.setReady(false) // hangs without exiting
	clk.Fire(t, registrar.ReconcilePeriod, patience)
	down(1)
	clk.Fire(t, registrar.ReconcilePeriod, patience) // still down: not logged again
	d.setReady(true)
	clk.Fire(t, registrar.ReconcilePeriod, patience)
	up(1)
	if n := strings.Count(logs.String(), "driver stopped answering"); n != 1 {
		t.Errorf("one outage logged %d times", n)
	}
	stop() // exits: its socket goes
	down(2)
	serveNamedDriver(t, e.driverSock, d)
	// The first GetPluginInfo after the Create event may find the driver not
	// serving yet (its socket's file is there from bind(2), a moment before
	// listen(2)): the recheck backs off on the fake clock, so fire each
	// recheck as it is armed until the driver's return is logged.
	clk.FireUntil(t, logged(t, &logs, logCount("driver answers again", 2)), patience, recheckBackoff()...)
	up(2)
	if m := metric(r); !strings.Contains(m, "csi_registrar_driver_reachable 1") {
		t.Errorf("driver_reachable not 1 after the driver came back:\n%s", m)
	}
	if st := r.Status().Stage; st != registrar.StageWaitingForKubelet {
		t.Errorf("stage %v after the outages, want it unchanged (waiting for kubelet)", st)
	}
}

// recheckBackoff is the delays of the control loop's looks at a driver that
// answered before and fails now (driverState.recheckBackoff: 100 ms,
// doubling, at most 10 s).
func recheckBackoff() []time.Duration {
	var ds []time.Duration
	for d := 100 * time.Millisecond; d < 10*time.Second; d *= 2 {
		ds = append(ds, d)
	}
	return append(ds, 10*time.Second)
}

// Issue 13: Run a second time returns an error (it panicked), and the status
// after Run returned is "stopped" (it stayed "registered").
func rowRunOnceThenStopped(t *testing.T) {
	s := startServed(t, nil)
	registerNow(t, s.r, s.sock)
	ended, cancel := context.WithCancel(context.Background())
	cancel() // so that a second Run that would run returns at once
	if err := s.r.Run(ended); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a second Run while the first runs = %v, want an error", err)
	}
	if err := s.run.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := s.r.Status(); st.Stage != registrar.StageStopped {
		t.Errorf("status after Run returned = %q, want stopped", st)
	}
	if code, body := get(s.r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "stopped") {
		t.Errorf("/readyz after Run = %d %q, want 503 stopped", code, body)
	}
	if err := s.r.Run(ended); err == nil {
		t.Error("Run after Run returned = nil, want an error")
	}
}

// Issue 13 item 4: the registration directory vanishing is its own stage,
// with its own reason; once it is back the retry serves it, and it is
// watched again.
func rowRegistrationDirectoryMissing(t *testing.T) {
	c := startWatched(t, quietKubelet)
	// The directory goes (as when its volume is unmounted) with its events
	// lost: the reconcile finds the socket gone, and no directory to serve in.
	if err := c.w.Remove(c.e.regDir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(c.e.regDir); err != nil {
		t.Fatal(err)
	}
	c.clk.Fire(t, registrar.ReconcilePeriod, patience)
	wantStage(t, c.r, registrar.StageSocketDirectoryMissing)
	if code, body := get(c.r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "registration directory missing") {
		t.Errorf("/readyz = %d %q, want 503 naming the missing directory", code, body)
	}
	if l := lastLine(c.logs.String(), "registration socket not created"); !strings.Contains(l, "outcome=missing-directory") ||
		!strings.Contains(l, "plugins_registry") {
		t.Errorf("log line %q does not name the fault and its fix", l)
	}
	if err := os.Mkdir(c.e.regDir, 0o750); err != nil {
		t.Fatal(err)
	}
	c.clk.Fire(t, time.Second, patience)
	awaitStatus(t, c.r, "served in the new directory", servingNew(c.r, c.sock, "missing-directory", 1))
	os.Remove(c.sock) // the new directory is watched: an event, no clock
	awaitStatus(t, c.r, "re-created on the event", servingNew(c.r, c.sock, "deleted", 1))
}

// quietKubelet gives the kubelet longer than a test advances the clock:
// the kubelet-silent re-creation would otherwise share the clock's jumps
// past the reconcile period (and the retry backoff) with what the test looks at.
func quietKubelet(o *registrar.Options) { o.KubeletWait = 24 * time.Hour }

// Issue 13 item 4: each listen error kind has its own stage and reason. The
// errors are sockfile.Listen's own where this machine can make them (as
// root, permission cannot be denied), else as it builds them.
func TestListenErrorKinds(t *testing.T) {
	dir := shortDir(t)
	file, live := filepath.Join(dir, "file"), filepath.Join(dir, "live.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	listen := func(path string) error {
		t.Helper()
		s, err := sockfile.Listen(path)
		if err == nil {
			s.Close()
			t.Fatalf("sockfile.Listen(%s) succeeded", path)
		}
		return err
	}
	for _, c := range []struct {
		name   string
		err    error
		path   string
		stage  registrar.Stage
		reason string
	}{
		{"live socket", listen(live), live, registrar.StageSocketConflict, "conflict"},
		{"regular file", listen(file), file, registrar.StageSocketNotASocket, "not-a-socket"},
		{"missing directory", listen(filepath.Join(dir, "none", "x.sock")), "", registrar.StageSocketDirectoryMissing, "missing-directory"},
		{"permission", fmt.Errorf("create: %w", &sockfile.ListenError{Kind: sockfile.KindPermission}), "", registrar.StageSocketPermissionDenied, "permission"},
		{"other kind", &sockfile.ListenError{Kind: sockfile.KindOther}, "", registrar.StageSocketError, "listen-error"},
		{"not a ListenError", errors.New("something else"), "", registrar.StageSocketError, "listen-error"},
		{"occupied by a socket", sockfile.Occupied(live), "", registrar.StageSocketConflict, "conflict"},
		{"occupied by a file", sockfile.Occupied(file), "", registrar.StageSocketNotASocket, "not-a-socket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stage, reason := registrar.ListenFault(c.err)
			if stage != c.stage || reason != c.reason {
				t.Errorf("ListenFault(%v) = %q, %q; want %q, %q", c.err, stage, reason, c.stage, c.reason)
			}
		})
	}
}

// Issue 13 item 6: the library's errors name the Options field, not a flag.
func TestNewErrorsNameOptions(t *testing.T) {
	for _, c := range []struct {
		field  string
		adjust func(*registrar.Options)
	}{
		{"Options.Timeout", func(o *registrar.Options) { o.Timeout = -time.Second }},
		{"Options.ConnectionTimeout", func(o *registrar.Options) { o.ConnectionTimeout = -time.Second }},
		{"Options.KubeletWait", func(o *registrar.Options) { o.KubeletWait = -time.Second }},
		{"Options.RegistrationRetryMax", func(o *registrar.Options) { o.RegistrationRetryMax = -time.Second }},
		{"Options.CSIAddress", func(o *registrar.Options) { o.CSIAddress = "tcp://1.2.3.4:5" }},
		{"Options.KubeletRegistrationPath", func(o *registrar.Options) { o.KubeletRegistrationPath = "relative/csi.sock" }},
	} {
		t.Run(c.field, func(t *testing.T) {
			o := registrar.Options{KubeletRegistrationPath: "/k/csi.sock"}
			c.adjust(&o)
			_, err := registrar.New(o)
			if !csiplugin.IsValidationError(err) || !strings.Contains(err.Error(), c.field) || strings.Contains(err.Error(), "--") {
				t.Errorf("New = %v, want a validation error naming %s and no flag", err, c.field)
			}
		})
	}
}

// The reconcile's own GetInfo (after a watcher error) goes through our
// socket but is not the kubelet's: it neither counts nor changes the stage.
func rowSelfCheckIsNotTheKubelet(t *testing.T) {
	c := startWatched(t, nil)
	registerNow(t, c.r, c.sock)
	c.w.Errors <- fsnotify.ErrEventOverflow
	awaitLog(t, c.logs, "the reconcile done", logAtLeast("deep=true", 1))
	c.w.Errors <- fsnotify.ErrEventOverflow // the loop took the first one: it is done with it
	awaitLog(t, c.logs, "a second reconcile", logCount("deep=true", 2))
	if m := metric(c.r); !strings.Contains(m, "csi_registrar_getinfo_calls_total 1\n") ||
		!strings.Contains(m, `csi_registrar_socket_creations_total{reason="start"} 1`) || !strings.Contains(m, `csi_registrar_socket_creations_total{reason="unresponsive"} 0`) {
		t.Errorf("the self-check counted as the kubelet's GetInfo, or re-created the socket:\n%s", m)
	}
	if st := c.r.Status(); st.Stage != registrar.StageRegistered || st.Detail != "" {
		t.Errorf("status %q after the self-checks, want registered", st)
	}
}
