//go:build bench

package main

// Process-level performance figures (issue 6), measured on the binary as it
// is shipped: `make bench` builds bin/csi-registrar and passes it as
// BENCH_BINARY (without it, the test binary TestMain built is used and the
// size figure is not the shipped one). With UPSTREAM_REGISTRAR set to a
// kubernetes-csi node-driver-registrar binary, every figure is measured for
// it too, in the same run, alternating the two, and both use
// `csi-registrar driver` as their CSI driver.
//
//	go test -tags bench -run '^TestBench' -v -timeout 30m ./cmd/csi-registrar
//
// Each figure is appended as a row to BENCH_RESULTS (tab-separated: figure,
// what, runs, ours, goal, verdict, upstream, ratio) and logged. There are no
// assertions on times: a missed goal is a row that says MISSED.
//
// Environment:
//
//	BENCH_BINARY        the csi-registrar binary to measure (default: TestMain's build)
//	BENCH_IMAGE         the image tarball `make image` wrote, for figure 5
//	UPSTREAM_REGISTRAR  upstream's binary: adds its column and the ratio
//	BENCH_RESULTS       file the rows are appended to
//	BENCH_RUNS          runs of each timed figure (default 10, at least 1)
//	BENCH_IDLE          idle window of figures 4 and 6 (default 60s)
//	BENCH_INSTANCES     registrars measured side by side for figures 4 and 6 (default 10)
//	BENCH_FLOOD_CONNS, BENCH_FLOOD_CALLS  figure 9's load (default 100 × 1000)
//	BENCH_PROFILE_DIR   if set, figure 9 runs ours with --enable-pprof and saves heap and
//	                    goroutine profiles taken during the flood there

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/internal/testwait"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// ---------------------------------------------------------------------------
// Configuration

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchEnvDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// impl is one registrar implementation under test.
type impl struct {
	name string // "ours" or "upstream"
	bin  string
}

func (im impl) upstream() bool { return im.name == "upstream" }

// registerArgs are the flags both implementations understand.
func (im impl) registerArgs(driverSock, regDir string, extra ...string) []string {
	args := []string{"--csi-address=" + driverSock, "--kubelet-registration-path=" + driverSock,
		"--plugin-registration-path=" + regDir}
	if !im.upstream() {
		args = append([]string{"register"}, args...)
	}
	return append(args, extra...)
}

func oursBin(t *testing.T) string {
	if b := os.Getenv("BENCH_BINARY"); b != "" {
		if !fileExists(b) {
			t.Fatalf("BENCH_BINARY=%s does not exist", b)
		}
		return b
	}
	return binary
}

// impls returns ours and, when UPSTREAM_REGISTRAR is set, upstream.
// perImpl is a zero R for each implementation, by its name: where a
// figure gathers each one's results.
func perImpl[R any](ims []impl) map[string]*R {
	res := make(map[string]*R, len(ims))
	for _, im := range ims {
		res[im.name] = new(R)
	}
	return res
}

func impls(t *testing.T) []impl {
	out := []impl{{name: "ours", bin: oursBin(t)}}
	if u := os.Getenv("UPSTREAM_REGISTRAR"); u != "" {
		if !fileExists(u) {
			t.Fatalf("UPSTREAM_REGISTRAR=%s does not exist", u)
		}
		out = append(out, impl{name: "upstream", bin: u})
	}
	return out
}

// alternate returns the implementations in the order of run i: A B, B A, …
// so that neither always runs first.
func alternate(ims []impl, i int) []impl {
	if i%2 == 1 {
		return []impl{ims[len(ims)-1], ims[0]}[:len(ims)]
	}
	return ims
}

// ---------------------------------------------------------------------------
// Results

// row is one line of the results table.
type row struct {
	fig, what string
	unit      string             // "ms", "MB", "/s", "" (count)
	ours, up  []float64          // samples
	upNote    string             // replaces upstream's figures (e.g. "never")
	goal      string             // "" = reported only
	met       func(s stats) bool // nil = reported only
}

type stats struct {
	n                int
	min, median, max float64
}

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{n: len(s), min: s[0], median: med, max: s[len(s)-1]}
}

func (r row) format(v float64) string {
	switch r.unit {
	case "ms":
		switch {
		case v < 10:
			return fmt.Sprintf("%.2f ms", v)
		case v < 100:
			return fmt.Sprintf("%.1f ms", v)
		}
		return fmt.Sprintf("%.0f ms", v)
	case "s":
		return fmt.Sprintf("%.2f s", v)
	case "MB":
		return fmt.Sprintf("%.2f MB", v)
	case "/s":
		return fmt.Sprintf("%.3f/s", v)
	case "%":
		return fmt.Sprintf("%.2f %%", v)
	case "bytes":
		return fmt.Sprintf("%.2f MB (%.2f MiB)", v/1e6, v/(1<<20))
	case "µs":
		return fmt.Sprintf("%.0f µs", v)
	case "calls/s":
		return fmt.Sprintf("%.0f/s", v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (r row) span(xs []float64) string {
	s := summarize(xs)
	if s.n == 1 || s.min == s.max {
		return r.format(s.median)
	}
	return r.format(s.min) + " / " + r.format(s.median) + " / " + r.format(s.max)
}

// record logs the row and appends it to BENCH_RESULTS.
func record(t *testing.T, r row) {
	t.Helper()
	ours := summarize(r.ours)
	verdict := ""
	if r.met != nil && ours.n > 0 {
		verdict = "met"
		if !r.met(ours) {
			verdict = "MISSED"
		}
	}
	oursCol, upCol, ratio := "n/a", "", ""
	if ours.n > 0 {
		oursCol = r.span(r.ours)
	}
	switch {
	case r.upNote != "":
		upCol = r.upNote
	case len(r.up) > 0:
		upCol = r.span(r.up)
		if up := summarize(r.up); up.median > 0 && ours.n > 0 {
			ratio = fmt.Sprintf("%.2f×", ours.median/up.median)
		}
	}
	runs := strconv.Itoa(ours.n)
	fields := []string{r.fig, r.what, runs, oursCol, r.goal, verdict, upCol, ratio}
	for i, f := range fields {
		if f == "" {
			fields[i] = "-"
		}
	}
	line := strings.Join(fields, "\t")
	t.Logf("figure %s", strings.ReplaceAll(line, "\t", " | "))
	if p := os.Getenv("BENCH_RESULTS"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := fmt.Fprintln(f, line); err != nil {
			t.Fatal(err)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianAtMost(limit float64) func(stats) bool {
	return func(s stats) bool { return s.median <= limit }
}

func maxAtMost(limit float64) func(stats) bool {
	return func(s stats) bool { return s.max <= limit }
}

// ---------------------------------------------------------------------------
// Processes and the measuring client

// benchDir is a short temporary directory (socket paths ≤ 107 bytes).
func benchDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "crb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startQuiet starts bin without keeping its output (figures where the
// process logs a lot), killed at the end of the test.
func startQuiet(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{}), stateFile: filepath.Join(t.TempDir(), "registrar.state")}
	p.cmd.Env = append(childEnv(), envPrefix+"STATE_FILE="+p.stateFile)
	p.start(t)
	t.Cleanup(func() { p.stop() })
	return p
}

// stop sends SIGTERM and waits up to 10 s, then kills.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// startBenchDriver starts the reference driver as name on dir/csi/csi.sock,
// the one driver all runs of a figure share, and returns that socket.
func startBenchDriver(t *testing.T, dir, name string) string {
	t.Helper()
	sock := filepath.Join(dir, "csi", "csi.sock")
	os.MkdirAll(filepath.Dir(sock), 0o755)
	startDriver(t, oursBin(t), sock, name)
	return sock
}

// benchRegDir makes the registration directory of run i of im, and returns it
// with the path of the socket a registrar of driver creates there.
func benchRegDir(dir string, im impl, i int, driver string) (regDir, regSock string) {
	regDir = filepath.Join(dir, fmt.Sprintf("reg-%s-%d", im.name, i))
	os.Mkdir(regDir, 0o755)
	return regDir, filepath.Join(regDir, driver+"-reg.sock")
}

// waitFor checks cond every 10 ms until it holds, failing the test after
// waitTimeout. Only where nothing signals the condition: the benchmarks'
// waits for another registrar binary (upstream's, whose log this package
// does not parse) to accept connections or answer /healthz.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := testwait.Until(ctx, 10*time.Millisecond, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
	}
}

// startDriver starts `csi-registrar driver` on sock and waits until it serves.
func startDriver(t *testing.T, bin, sock, name string) *proc {
	t.Helper()
	p := startQuiet(t, bin, "driver", "--endpoint=unix://"+sock, "--driver-name="+name, "--node-id=bench-node")
	waitPath(t, sock)
	return p
}

// answerWaiter waits for a registration socket to answer GetInfo. It watches
// the socket's directory with inotify (set up before anything starts, so no
// event is missed), dials when the socket appears, and retries a refused
// connect at once (a socket that is bound but not yet listening). Its gRPC
// client exists before the clock starts. What it adds to a figure is the
// inotify wake-up, the connect and one HTTP/2 handshake: tens of µs.
type answerWaiter struct {
	path string
	w    *fsnotify.Watcher
	cc   *grpc.ClientConn
	once sync.Once
}

func newAnswerWaiter(t *testing.T, path string) *answerWaiter {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		t.Fatal(err)
	}
	a := &answerWaiter{path: path, w: w}
	a.cc, err = grpc.NewClient("passthrough:///registration",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(a.dial),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Microsecond, Multiplier: 1.6, MaxDelay: time.Millisecond},
			MinConnectTimeout: time.Minute,
		}))
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	return a
}

func (a *answerWaiter) close() {
	a.once.Do(func() {
		a.cc.Close()
		a.w.Close()
	})
}

func (a *answerWaiter) dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", a.path)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if errors.Is(err, syscall.ENOENT) {
			// Wait for the socket file; the short timer is only a safety net.
			select {
			case <-a.w.Events:
			case <-a.w.Errors:
			case <-time.After(2 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		// ECONNREFUSED: bound, not listening yet. Retry at once.
		time.Sleep(20 * time.Microsecond)
	}
}

// start makes the client try to connect now (for a socket that does not
// exist yet: it then waits for it).
func (a *answerWaiter) start() { a.cc.Connect() }

// answered waits until GetInfo succeeds and returns when it did.
func (a *answerWaiter) answered(ctx context.Context) (time.Time, error) {
	info, err := registerapi.NewRegistrationClient(a.cc).GetInfo(ctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	now := time.Now()
	if err != nil {
		return now, err
	}
	if info.GetName() == "" {
		return now, errors.New("GetInfo answered without a name")
	}
	return now, nil
}

// ---------------------------------------------------------------------------
// /proc

type procSample struct {
	rss, hwm, anon, file, pss float64 // bytes
	cpu                       time.Duration
	ctxsw                     int64
	threads                   int
}

func statusKB(status, key string) float64 {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseFloat(f[0], 64)
				return v * 1024
			}
		}
	}
	return math.NaN()
}

// sample reads memory, CPU time and context switches of pid, summed over
// all its threads (/proc/PID/task/*/{schedstat,status}).
func sample(t *testing.T, pid int) procSample {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	st := string(b)
	s := procSample{rss: statusKB(st, "VmRSS"), hwm: statusKB(st, "VmHWM"), anon: statusKB(st, "RssAnon"), file: statusKB(st, "RssFile")}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		s.pss = statusKB(string(b), "Pss")
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, task.Name())
		if b, err := os.ReadFile(dir + "schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				s.cpu += time.Duration(ns)
			}
		}
		if b, err := os.ReadFile(dir + "status"); err == nil {
			s.ctxsw += int64(statusKB(string(b), "voluntary_ctxt_switches")/1024 + statusKB(string(b), "nonvoluntary_ctxt_switches")/1024)
		}
		s.threads++
	}
	return s
}

// ---------------------------------------------------------------------------
// Figure 1: driver already serving → registration socket answers GetInfo,
// measured from the registrar's fork/exec.

func TestBenchStartWithDriverServing(t *testing.T) {
	got := startTimes(t, nil)
	record(t, row{fig: "1", what: "driver serving: registrar exec → GetInfo answered", unit: "ms",
		ours: got["ours"], up: got["upstream"], goal: "median ≤ 5 ms", met: medianAtMost(5)})
}

// Figure 1h: figure 1 with the handover (--rolling-update) on
// ours, beside upstream as it runs (no mode): the start also dials the
// rendezvous, binds it and checks the endpoint link.
func TestBenchStartHandover(t *testing.T) {
	got := startTimes(t, []string{"--rolling-update=00000000-0000-4000-8000-000000000001"})
	record(t, row{fig: "1h", what: "driver serving, the handover on ours: registrar exec → GetInfo answered", unit: "ms",
		ours: got["ours"], up: got["upstream"]})
}

// startTimes measures, BENCH_RUNS times per implementation (alternating),
// the registrar's fork/exec → its registration socket answering GetInfo,
// with the driver already serving; oursExtra are more flags of ours. With
// the handover ours is killed after each run: its exit, alone, would wait
// for a successor.
func startTimes(t *testing.T, oursExtra []string) map[string][]float64 {
	ims := impls(t)
	runs := benchEnvInt("BENCH_RUNS", 10)
	dir := benchDir(t)
	driverSock := startBenchDriver(t, dir, "bench.csi.example.com")
	got := map[string][]float64{}
	for i := range runs {
		for _, im := range alternate(ims, i) {
			regDir, regSock := benchRegDir(dir, im, i, "bench.csi.example.com")
			var extra []string
			if !im.upstream() {
				extra = oursExtra
			}
			a := newAnswerWaiter(t, regSock)
			a.start()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			p := startQuiet(t, im.bin, im.registerArgs(driverSock, regDir, extra...)...)
			t1, err := a.answered(ctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: registration socket did not answer: %v", im.name, err)
			}
			got[im.name] = append(got[im.name], ms(t1.Sub(t0)))
			a.close()
			if len(extra) > 0 {
				p.cmd.Process.Kill()
				<-p.done
			} else {
				p.stop()
			}
		}
	}
	return got
}

// ---------------------------------------------------------------------------
// Figure 2: registrar started first, the driver later → registration socket
// answers, measured from the driver's fork/exec. The driver starts 0.2–1.2 s
// after the registrar (random, so that upstream's 1 s re-dial is sampled at
// every phase; upstream gives up after 30 s).

func TestBenchLateDriver(t *testing.T) {
	ims := impls(t)
	runs := benchEnvInt("BENCH_RUNS", 10)
	dir := benchDir(t)
	rng := rand.New(rand.NewPCG(6, 2))
	got := map[string][]float64{}
	fromSocket := map[string][]float64{}
	var driverStart []float64 // the same driver for both
	for i := range runs {
		delay := 200*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
		for _, im := range alternate(ims, i) {
			run := filepath.Join(dir, fmt.Sprintf("%s-%d", im.name, i))
			driverSock := filepath.Join(run, "csi", "csi.sock")
			regDir := filepath.Join(run, "reg")
			os.MkdirAll(filepath.Dir(driverSock), 0o755)
			os.MkdirAll(regDir, 0o755)
			r := startQuiet(t, im.bin, im.registerArgs(driverSock, regDir)...)
			a := newAnswerWaiter(t, filepath.Join(regDir, "late.csi.example.com-reg.sock"))
			a.start()
			// The driver's socket creation, seen by inotify.
			dw, err := fsnotify.NewWatcher()
			if err != nil {
				t.Fatal(err)
			}
			dw.Add(filepath.Dir(driverSock))
			sockSeen := make(chan time.Time, 1)
			go func() {
				for ev := range dw.Events {
					if ev.Name == driverSock && ev.Has(fsnotify.Create) {
						sockSeen <- time.Now()
						return
					}
				}
			}()
			time.Sleep(delay)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			d := startQuiet(t, oursBin(t), "driver", "--endpoint=unix://"+driverSock, "--driver-name=late.csi.example.com", "--node-id=bench-node")
			t1, err := a.answered(ctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: registration socket did not answer after the driver started (registrar exited: %v): %v", im.name, r.exited(), err)
			}
			got[im.name] = append(got[im.name], ms(t1.Sub(t0)))
			select {
			case ts := <-sockSeen:
				fromSocket[im.name] = append(fromSocket[im.name], ms(t1.Sub(ts)))
				driverStart = append(driverStart, ms(ts.Sub(t0)))
			case <-time.After(time.Second):
			}
			dw.Close()
			a.close()
			r.stop()
			d.stop()
		}
	}
	record(t, row{fig: "2", what: "late driver: driver exec → GetInfo answered", unit: "ms",
		ours: got["ours"], up: got["upstream"], goal: "median ≤ 20 ms, max ≤ 50 ms",
		met: func(s stats) bool { return s.median <= 20 && s.max <= 50 }})
	record(t, row{fig: "2b", what: "late driver: driver socket created → GetInfo answered", unit: "ms",
		ours: fromSocket["ours"], up: fromSocket["upstream"]})
	record(t, row{fig: "2c", what: "late driver: of which driver exec → its socket created (csi-registrar driver, both columns)", unit: "ms",
		ours: driverStart})
}

// ---------------------------------------------------------------------------
// Figure 3: registration socket deleted → re-created and answering.

func TestBenchSocketDeleted(t *testing.T) {
	ims := impls(t)
	runs := benchEnvInt("BENCH_RUNS", 10)
	never := benchEnvDuration("BENCH_NEVER", time.Second) // how long "never" waits
	type setup struct {
		regSock string
	}
	setups := map[string]setup{}
	for _, im := range ims {
		dir := benchDir(t)
		driverSock := filepath.Join(dir, "csi", "csi.sock")
		regDir := filepath.Join(dir, "reg")
		os.MkdirAll(filepath.Dir(driverSock), 0o755)
		os.MkdirAll(regDir, 0o755)
		startDriver(t, oursBin(t), driverSock, "del.csi.example.com")
		startQuiet(t, im.bin, im.registerArgs(driverSock, regDir)...)
		regSock := filepath.Join(regDir, "del.csi.example.com-reg.sock")
		kubeletRegister(t, regSock)
		setups[im.name] = setup{regSock: regSock}
	}
	got := map[string][]float64{}
	neverCount := map[string]int{}
	for i := range runs {
		for _, im := range alternate(ims, i) {
			s := setups[im.name]
			if !isSocket(s.regSock) {
				neverCount[im.name]++ // still gone since an earlier run
				continue
			}
			a := newAnswerWaiter(t, s.regSock)
			ctx, cancel := context.WithTimeout(context.Background(), never)
			t0 := time.Now()
			if err := os.Remove(s.regSock); err != nil {
				t.Fatal(err)
			}
			t1, err := a.answered(ctx)
			cancel()
			a.close()
			if err != nil {
				neverCount[im.name]++
				continue
			}
			got[im.name] = append(got[im.name], ms(t1.Sub(t0)))
			kubeletRegister(t, s.regSock) // the kubelet registers again on the new socket
		}
	}
	r := row{fig: "3", what: "registration socket deleted → re-created and answering", unit: "ms",
		ours: got["ours"], up: got["upstream"], goal: "median ≤ 20 ms", met: medianAtMost(20)}
	if n := neverCount["ours"]; n > 0 {
		t.Errorf("ours: the socket was not re-created within %s in %d of %d runs", never, n, runs)
		r.met = func(stats) bool { return false }
	}
	if n := neverCount["upstream"]; n > 0 {
		r.upNote = fmt.Sprintf("never (%d/%d runs: not re-created within %s)", n, runs, never)
	}
	record(t, r)
}

// kubeletRegister registers through regSock as the kubelet does.
func kubeletRegister(t *testing.T, regSock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// The file exists from bind(2) on; the kubelet dials it only later (its
	// reconciler runs once a second), so wait until it accepts connections
	// (nothing signals that for upstream's registrar: checked every 10 ms).
	waitFor(t, "the registration socket "+regSock, func() bool {
		c, err := net.Dial("unix", regSock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	reg, err := registrartest.Register(ctx, regSock)
	if err != nil {
		t.Fatalf("kubelet registration through %s: %v", regSock, err)
	}
	if reg.Err != nil {
		t.Fatalf("the kubelet would reject the registration through %s: %v", regSock, reg.Err)
	}
}

// ---------------------------------------------------------------------------
// Figures 4 and 6: memory after registration and after an idle window, and
// the idle cost (CPU time, context switches over all threads). Instances of
// both implementations run side by side, each with its own driver.

func TestBenchIdle(t *testing.T) {
	ims := impls(t)
	n := benchEnvInt("BENCH_INSTANCES", 10)
	idle := benchEnvDuration("BENCH_IDLE", time.Minute)
	type inst struct {
		im              impl
		reg, drv        *proc
		afterReg        procSample
		drvAfterReg     procSample
		before, after   procSample
		drvBef, drvAfte procSample
	}
	var all []*inst
	for i := range n {
		for _, im := range alternate(ims, i) {
			dir := benchDir(t)
			name := fmt.Sprintf("idle%d.csi.example.com", i)
			driverSock := filepath.Join(dir, "csi", "csi.sock")
			regDir := filepath.Join(dir, "reg")
			os.MkdirAll(filepath.Dir(driverSock), 0o755)
			os.MkdirAll(regDir, 0o755)
			in := &inst{im: im}
			in.drv = startDriver(t, oursBin(t), driverSock, name)
			// As in the manifests: with the HTTP endpoint (health, metrics).
			in.reg = startQuiet(t, im.bin, im.registerArgs(driverSock, regDir, "--http-endpoint=127.0.0.1:"+strconv.Itoa(freePort(t)))...)
			kubeletRegister(t, filepath.Join(regDir, name+"-reg.sock"))
			all = append(all, in)
		}
	}
	// Let the registrations settle (Notify handled, first GC), then sample.
	time.Sleep(time.Second)
	for _, in := range all {
		in.afterReg = sample(t, in.reg.pid())
		in.drvAfterReg = sample(t, in.drv.pid())
		in.before, in.drvBef = in.afterReg, in.drvAfterReg
	}
	t.Logf("idle for %s with %d registrars and %d drivers", idle, len(all), len(all))
	time.Sleep(idle)
	for _, in := range all {
		in.after = sample(t, in.reg.pid())
		in.drvAfte = sample(t, in.drv.pid())
		if in.reg.exited() || in.drv.exited() {
			t.Fatalf("%s: a process exited during the idle window", in.im.name)
		}
	}
	col := func(im string, f func(*inst) float64) []float64 {
		var out []float64
		for _, in := range all {
			if in.im.name == im {
				out = append(out, f(in))
			}
		}
		return out
	}
	rowOf := func(fig, what, unit string, f func(*inst) float64, goal string, met func(stats) bool) row {
		return row{fig: fig, what: what, unit: unit, ours: col("ours", f), up: col("upstream", f), goal: goal, met: met}
	}
	mb := func(v float64) float64 { return v / 1e6 }
	secs := idle.Seconds()
	record(t, rowOf("4a", "register VmRSS after registration", "MB", func(in *inst) float64 { return mb(in.afterReg.rss) }, "≤ 12 MB", maxAtMost(12)))
	record(t, rowOf("4b", "register VmRSS after "+idle.String()+" idle", "MB", func(in *inst) float64 { return mb(in.after.rss) }, "≤ 12 MB", maxAtMost(12)))
	record(t, rowOf("4c", "register VmHWM after "+idle.String()+" idle", "MB", func(in *inst) float64 { return mb(in.after.hwm) }, "≤ 12 MB", maxAtMost(12)))
	record(t, rowOf("4d", "register RssAnon after idle (heap, stacks)", "MB", func(in *inst) float64 { return mb(in.after.anon) }, "", nil))
	record(t, rowOf("4e", "register RssFile after idle (mapped binary)", "MB", func(in *inst) float64 { return mb(in.after.file) }, "", nil))
	record(t, rowOf("4f", "register Pss after idle (binary shared with its driver)", "MB", func(in *inst) float64 { return mb(in.after.pss) }, "", nil))
	record(t, row{fig: "4g", what: "driver VmRSS after idle", unit: "MB",
		ours: col("ours", func(in *inst) float64 { return mb(in.drvAfte.rss) }), up: nil})
	record(t, row{fig: "4h", what: "driver VmHWM after idle", unit: "MB",
		ours: col("ours", func(in *inst) float64 { return mb(in.drvAfte.hwm) })})
	record(t, rowOf("6a", "register idle CPU time over "+idle.String(), "ms", func(in *inst) float64 { return ms(in.after.cpu - in.before.cpu) }, "", nil))
	record(t, rowOf("6b", "register idle wakeups (context switches, all threads)", "/s",
		func(in *inst) float64 { return float64(in.after.ctxsw-in.before.ctxsw) / secs }, "≤ 0.1/s", maxAtMost(0.1)))
	record(t, rowOf("6c", "register threads", "", func(in *inst) float64 { return float64(in.after.threads) }, "", nil))
	record(t, row{fig: "6d", what: "driver idle wakeups (context switches, all threads)", unit: "/s",
		ours: col("ours", func(in *inst) float64 { return float64(in.drvAfte.ctxsw-in.drvBef.ctxsw) / secs })})
	record(t, row{fig: "6e", what: "driver idle CPU time over " + idle.String(), unit: "ms",
		ours: col("ours", func(in *inst) float64 { return ms(in.drvAfte.cpu - in.drvBef.cpu) })})
}

// ---------------------------------------------------------------------------
// Figure 5: the binary as shipped, and the image `make image` produced.

func TestBenchSize(t *testing.T) {
	bin := oursBin(t)
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("BENCH_BINARY") == "" {
		t.Logf("BENCH_BINARY is not set: %s is the test build, not the shipped binary", bin)
	}
	r := row{fig: "5a", what: "binary as shipped (both roles)", unit: "bytes", ours: []float64{float64(st.Size())},
		goal: "≤ 14 MB", met: maxAtMost(14e6)}
	if u := os.Getenv("UPSTREAM_REGISTRAR"); u != "" {
		ust, err := os.Stat(u)
		if err != nil {
			t.Fatal(err)
		}
		r.up = []float64{float64(ust.Size())}
	}
	record(t, r)
	if u := os.Getenv("UPSTREAM_REGISTRAR"); u != "" {
		// Upstream's binary stripped the way ours is (-s -w ≈ strip).
		stripped := filepath.Join(benchDir(t), "upstream-stripped")
		if out, err := exec.Command("strip", "-o", stripped, u).CombinedOutput(); err != nil {
			t.Logf("strip %s: %v %s", u, err, out)
		} else if sst, err := os.Stat(stripped); err == nil {
			record(t, row{fig: "5b", what: "binary stripped (ours is built stripped)", unit: "bytes",
				ours: []float64{float64(st.Size())}, up: []float64{float64(sst.Size())}})
		}
	}
	if img := os.Getenv("BENCH_IMAGE"); img != "" {
		ist, err := os.Stat(img)
		if err != nil {
			t.Fatalf("BENCH_IMAGE: %v", err)
		}
		record(t, row{fig: "5c", what: "image (docker-archive tar from make image)", unit: "bytes", ours: []float64{float64(ist.Size())}})
	} else {
		record(t, row{fig: "5c", what: "image (docker-archive tar from make image): BENCH_IMAGE not set", unit: "bytes"})
	}
}

// ---------------------------------------------------------------------------
// Figure 9: GetInfo flood. Each run starts a fresh registrar, registers it,
// then opens BENCH_FLOOD_CONNS connections that each call GetInfo
// BENCH_FLOOD_CALLS times in a row (1 s deadline per call, as the kubelet).
// The load generator is this test process, on the same 2 cores.

func TestBenchGetInfoFlood(t *testing.T) {
	ims := impls(t)
	runs := benchEnvInt("BENCH_FLOOD_RUNS", benchEnvInt("BENCH_RUNS", 10))
	conns := benchEnvInt("BENCH_FLOOD_CONNS", 100)
	calls := benchEnvInt("BENCH_FLOOD_CALLS", 1000)
	dir := benchDir(t)
	driverSock := startBenchDriver(t, dir, "flood.csi.example.com")
	type result struct{ errors, p50, p99, max, growth, hwmGrowth, rate, cpuPerCall, cpuShare []float64 }
	res := perImpl[result](ims)
	for i := range runs {
		for _, im := range alternate(ims, i) {
			regDir, regSock := benchRegDir(dir, im, i, "flood.csi.example.com")
			var extra []string
			profDir := os.Getenv("BENCH_PROFILE_DIR")
			addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			if profDir != "" && !im.upstream() {
				extra = []string{"--http-endpoint=" + addr, "--enable-pprof"}
			}
			p := startQuiet(t, im.bin, im.registerArgs(driverSock, regDir, extra...)...)
			kubeletRegister(t, regSock)
			time.Sleep(200 * time.Millisecond)
			before := sample(t, p.pid())
			profiled := make(chan struct{})
			if extra != nil {
				// A heap profile in the middle of the flood, for `go tool pprof`.
				go func() {
					defer close(profiled)
					time.Sleep(300 * time.Millisecond)
					for _, prof := range []string{"heap", "goroutine", "heap?debug=1"} {
						file := fmt.Sprintf("flood-%s-%d.pb.gz", prof, i)
						if prof == "heap?debug=1" {
							file = fmt.Sprintf("flood-memstats-%d.txt", i)
						}
						if err := fetchTo("http://"+addr+"/debug/pprof/"+prof, filepath.Join(profDir, file)); err != nil {
							t.Logf("profile %s: %v", prof, err)
						}
					}
				}()
			} else {
				close(profiled)
			}
			errs, lat, elapsed := flood(t, regSock, conns, calls)
			after := sample(t, p.pid())
			<-profiled
			p.stop()
			r := res[im.name]
			slices.Sort(lat)
			q := func(f float64) float64 {
				if len(lat) == 0 {
					return math.NaN()
				}
				return ms(lat[min(len(lat)-1, int(f*float64(len(lat))))])
			}
			r.errors = append(r.errors, float64(errs))
			r.p50 = append(r.p50, q(0.50))
			r.p99 = append(r.p99, q(0.99))
			r.max = append(r.max, q(1))
			r.growth = append(r.growth, (after.rss-before.rss)/1e6)
			r.hwmGrowth = append(r.hwmGrowth, (after.hwm-before.rss)/1e6)
			r.rate = append(r.rate, float64(len(lat))/elapsed.Seconds())
			serverCPU := after.cpu - before.cpu
			r.cpuPerCall = append(r.cpuPerCall, float64(serverCPU.Microseconds())/float64(max(len(lat), 1)))
			r.cpuShare = append(r.cpuShare, 100*serverCPU.Seconds()/(elapsed.Seconds()*float64(runtime.NumCPU())))
			t.Logf("%s run %d: %d errors, p50 %.2f ms, p99 %.2f ms, max %.1f ms, %.0f calls/s, RSS %.1f → %.1f MB (peak %.1f MB)",
				im.name, i, errs, q(0.5), q(0.99), q(1), float64(len(lat))/elapsed.Seconds(), before.rss/1e6, after.rss/1e6, after.hwm/1e6)
		}
	}
	load := fmt.Sprintf("%d conns × %d calls", conns, calls)
	ours, up := res["ours"], res["upstream"]
	if up == nil {
		up = &result{}
	}
	record(t, row{fig: "9a", what: "GetInfo flood " + load + ": errors per run", ours: ours.errors, up: up.errors,
		goal: "0", met: maxAtMost(0)})
	record(t, row{fig: "9b", what: "GetInfo flood: p99 latency (client on the same 2 cores)", unit: "ms", ours: ours.p99, up: up.p99,
		goal: "≤ 5 ms", met: medianAtMost(5)})
	record(t, row{fig: "9c", what: "GetInfo flood: p50 latency", unit: "ms", ours: ours.p50, up: up.p50})
	record(t, row{fig: "9d", what: "GetInfo flood: max latency", unit: "ms", ours: ours.max, up: up.max})
	record(t, row{fig: "9e", what: "GetInfo flood: throughput", unit: "calls/s", ours: ours.rate, up: up.rate})
	record(t, row{fig: "9h", what: "GetInfo flood: registrar CPU per call", unit: "µs", ours: ours.cpuPerCall, up: up.cpuPerCall})
	record(t, row{fig: "9i", what: "GetInfo flood: registrar's share of the machine's CPU (the rest: load generator, kernel)", unit: "%", ours: ours.cpuShare, up: up.cpuShare})
	record(t, row{fig: "9f", what: "GetInfo flood: RSS growth (peak VmHWM − VmRSS before)", unit: "MB", ours: ours.hwmGrowth, up: up.hwmGrowth,
		goal: "≤ 5 MB", met: maxAtMost(5)})
	record(t, row{fig: "9g", what: "GetInfo flood: VmRSS after − before", unit: "MB", ours: ours.growth, up: up.growth})
}

// fetchTo saves the body of url in file.
func fetchTo(url, file string) error {
	rsp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, rsp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rsp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// flood runs conns connections × calls GetInfo calls against regSock and
// returns the number of failed calls and the latencies of the others.
func flood(t *testing.T, regSock string, conns, calls int) (errs int, lat []time.Duration, elapsed time.Duration) {
	t.Helper()
	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		cc, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cc.Connect()
		ccs[i] = cc
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	lat = make([]time.Duration, 0, conns*calls)
	for _, cc := range ccs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := registerapi.NewRegistrationClient(cc)
			mine := make([]time.Duration, 0, calls)
			bad := 0
			<-start
			for range calls {
				ctx, cancel := context.WithTimeout(context.Background(), csiplugin.GetInfoTimeout)
				t0 := time.Now()
				_, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
				d := time.Since(t0)
				cancel()
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return errs, lat, time.Since(t0)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
