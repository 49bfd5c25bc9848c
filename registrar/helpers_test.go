package registrar_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// patience is how long a test waits for an outcome. Generous on purpose:
// tests assert what happens, benchmarks measure how fast.
const patience = 10 * time.Second

// shortDir makes a temporary directory with a short path (unix socket paths
// are limited to 107 bytes; t.TempDir() paths can be longer).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// env is one test's directories: the driver's socket dir and the kubelet's
// plugins_registry.
type env struct {
	driverSock string
	regDir     string
}

func newEnv(t *testing.T) env {
	d := shortDir(t)
	e := env{driverSock: filepath.Join(d, "csi", "csi.sock"), regDir: filepath.Join(d, "reg")}
	for _, p := range []string{filepath.Dir(e.driverSock), e.regDir} {
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e env) regSock(name string) string { return filepath.Join(e.regDir, name+"-reg.sock") }

// logBuffer collects log output for assertions; a test waits for a line
// with awaitLog.
type logBuffer = registrartest.Buffer

func testLogger(t *testing.T, extra io.Writer) *slog.Logger {
	w := io.Writer(tWriter{t})
	if extra != nil {
		w = io.MultiWriter(w, extra)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// running is a background Run whose result the test can wait for.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    *error        // Run's result, valid after done
}

// stop cancels Run and returns its result.
func (r running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return *r.err
	case <-time.After(patience):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

func start(t *testing.T, run func(context.Context) error) running {
	ctx, cancel := context.WithCancel(context.Background())
	r := running{cancel: cancel, done: make(chan struct{}), err: new(error)}
	go func() { *r.err = run(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(patience):
			t.Error("Run did not return at cleanup")
		}
	})
	return r
}

// startStubDriver runs the reference driver on e.driverSock.
func startStubDriver(t *testing.T, e env, name string) running {
	t.Helper()
	d, err := stubdriver.New(stubdriver.Options{Endpoint: "unix://" + e.driverSock, Name: name, NodeID: "node-1",
		MaxVolumesPerNode: 7, Topology: map[string]string{"topology.stub.csi.example.com/zone": "zone-a"},
		Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, d.Run)
}

// startRegistrar creates and runs a registrar for e with opts adjusted, on
// the real clock.
func startRegistrar(t *testing.T, e env, logs io.Writer, adjust func(*registrar.Options)) (*registrar.Registrar, running) {
	t.Helper()
	return startRegistrarOn(t, nil, e, logs, adjust)
}

// startRegistrarOn is startRegistrar with the control loop on clk (the real
// clock if nil).
func startRegistrarOn(t *testing.T, clk *registrar.FakeClock, e env, logs io.Writer, adjust func(*registrar.Options)) (*registrar.Registrar, running) {
	t.Helper()
	r := newRegistrar(t, clk, e, logs, adjust)
	return r, start(t, r.Run)
}

// newRegistrar creates (does not run) a registrar for e.
func newRegistrar(t *testing.T, clk *registrar.FakeClock, e env, logs io.Writer, adjust func(*registrar.Options)) *registrar.Registrar {
	t.Helper()
	opts := registrar.Options{
		CSIAddress:              e.driverSock,
		KubeletRegistrationPath: e.driverSock, // this machine is the "host"
		PluginRegistrationPath:  e.regDir,
		Logger:                  testLogger(t, logs),
	}
	if adjust != nil {
		adjust(&opts)
	}
	r, err := registrar.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		r.UseClock(clk)
	}
	return r
}

// runUntilError creates a registrar for e on the CSI address addr (the
// kubelet's path to it a placeholder) and runs it; Run must return on its
// own within patience, and runUntilError returns its result.
func runUntilError(t *testing.T, e env, addr string) (*registrar.Registrar, error) {
	t.Helper()
	r := newRegistrar(t, nil, e, nil, func(o *registrar.Options) {
		o.CSIAddress, o.KubeletRegistrationPath = addr, "/k/csi.sock"
	})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	err := r.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run did not return on its own within %s (Run = %v)", patience, err)
	}
	return r, err
}

// awaitStatus waits until r's Status satisfies cond, looking at it again at
// each change (WatchStatus), and fails the test with the last Status it saw
// after patience. cond may also read what the registrar changes before it
// publishes the Status that goes with it: the socket a transition serves,
// the metrics it counts (never what changes without a Status update).
func awaitStatus(t testing.TB, r *registrar.Registrar, what string, cond func(registrar.Status) bool) registrar.Status {
	t.Helper()
	deadline := time.NewTimer(patience)
	defer deadline.Stop()
	for {
		st, changed := r.WatchStatus()
		if cond(st) {
			return st
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s; last status: %q", patience, what, st)
		}
	}
}

func stageIs(stage registrar.Stage) func(registrar.Status) bool {
	return func(st registrar.Status) bool { return st.Stage == stage }
}

// wantStage waits until r's published stage is want.
func wantStage(t *testing.T, r *registrar.Registrar, want registrar.Stage) {
	t.Helper()
	awaitStatus(t, r, "stage "+want.String(), stageIs(want))
}

// serving is the Status of a registrar that serves its registration socket
// at sock and waits for the kubelet: the loop publishes it once the socket
// listens (socketevents.go, create).
func serving(sock string) func(registrar.Status) bool {
	return func(st registrar.Status) bool { return st.Stage == registrar.StageWaitingForKubelet && answers(sock) }
}

// servingNew is serving, once the loop has counted a socket creation for
// reason n times (it counts before it publishes).
func servingNew(r *registrar.Registrar, sock, reason string, n int) func(registrar.Status) bool {
	created := fmt.Sprintf("csi_registrar_socket_creations_total{reason=%q} %d\n", reason, n)
	return func(st registrar.Status) bool { return serving(sock)(st) && strings.Contains(metric(r), created) }
}

// awaitLog waits until cond holds for the log written so far, looking at it
// again after each write, and fails the test after patience (the log is in
// the test's output).
func awaitLog(t testing.TB, logs *logBuffer, what string, cond func(log string) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	l, err := logs.Wait(ctx, cond)
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s in the log", patience, what)
	}
	return l
}

// logCount is a condition of awaitLog: exactly n lines contain s.
func logCount(s string, n int) func(string) bool {
	return func(l string) bool { return strings.Count(l, s) == n }
}

// logAtLeast is a condition of awaitLog: n lines or more contain s.
func logAtLeast(s string, n int) func(string) bool {
	return func(l string) bool { return strings.Count(l, s) >= n }
}

// logged returns a channel closed once cond holds for logs, for a wait
// that acts until then (FakeClock.FireUntil). The goroutine that watches
// the log ends with the test.
func logged(t testing.TB, logs *logBuffer, cond func(log string) bool) <-chan struct{} {
	ctx, cancel := context.WithCancel(context.Background())
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		if _, err := logs.Wait(ctx, cond); err == nil {
			close(done)
		}
	}()
	t.Cleanup(func() { cancel(); <-ended })
	return done
}

// awaitDir waits until cond holds, looking again at each file event in dir
// (registrartest.WaitDir), and fails the test after within.
func awaitDir(t testing.TB, dir string, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := registrartest.WaitDir(ctx, dir, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", within, what, err)
	}
}

// metric returns the /metrics body.
func metric(r *registrar.Registrar) string {
	_, m := get(r, "/metrics")
	return m
}

func isSocket(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode().Type() == os.ModeSocket
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// answers reports whether a unix socket accepts connections.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// get serves one request to the registrar's HTTP handler.
func get(r *registrar.Registrar, path string) (int, string) {
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// namedDriver is a real CSI Identity+Node server that reports whatever name
// the test sets, including names the real driver would refuse to report.
type namedDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	mu       sync.Mutex
	name     string
	notReady bool
}

func (d *namedDriver) setReady(ok bool) { d.mu.Lock(); d.notReady = !ok; d.mu.Unlock() }

func (d *namedDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.GetPluginInfoResponse{Name: d.name}, nil
}

func (d *namedDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(!d.notReady)}, nil
}

func (d *namedDriver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: "node-1"}, nil
}

// serveNamedDriver serves d on path until the test ends or stop is called;
// stop removes the socket like a driver exiting cleanly.
func serveNamedDriver(t *testing.T, path string, d *namedDriver) (stop func()) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); <-done; os.Remove(path) }) }
	t.Cleanup(stop)
	return stop
}

// served is a registrar with the reference driver, in a new env, whose
// registration socket answers.
type served struct {
	e    env
	r    *registrar.Registrar
	run  running
	clk  *registrar.FakeClock // nil: the real clock
	sock string
	logs *logBuffer
	w    *fsnotify.Watcher // Run's file watcher, with startWatched
}

// startServed starts a served registrar on the real clock with opts
// adjusted.
func startServed(t *testing.T, adjust func(*registrar.Options)) served {
	t.Helper()
	return startServedOn(t, nil, adjust, nil)
}

// startClocked starts a served registrar on a fake clock with opts adjusted.
func startClocked(t *testing.T, adjust func(*registrar.Options)) served {
	t.Helper()
	return startServedOn(t, registrar.NewFakeClock(), adjust, nil)
}

// startServedOn starts a served registrar on clk (the real clock if nil)
// with opts adjusted; before, if not nil, sees the registrar before it runs.
func startServedOn(t *testing.T, clk *registrar.FakeClock, adjust func(*registrar.Options), before func(*registrar.Registrar)) served {
	t.Helper()
	s := served{e: newEnv(t), clk: clk, logs: &logBuffer{}}
	startStubDriver(t, s.e, stubName)
	s.r = newRegistrar(t, clk, s.e, s.logs, adjust)
	if before != nil {
		before(s.r)
	}
	s.run = start(t, s.r.Run)
	s.sock = s.e.regSock(stubName)
	awaitStatus(t, s.r, "registration socket", serving(s.sock))
	return s
}

// registerNow registers as the kubelet does and waits for the stage.
func registerNow(t *testing.T, r *registrar.Registrar, sock string) {
	t.Helper()
	if reg, err := registrartest.Register(context.Background(), sock); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	awaitStatus(t, r, "registered", stageIs(registrar.StageRegistered))
}
