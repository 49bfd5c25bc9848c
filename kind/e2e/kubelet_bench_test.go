//go:build bench && !e2e

package e2e

// Kubelet figures of issue 6 (7 and 8), measured against the real kubelet of
// the local node (kind/localnode). Drivers and registrars run as host
// processes writing into /var/lib/kubelet/plugins_registry and
// /var/lib/kubelet/plugins/<name>/, and are all removed at the end. The node
// is shared: run this only under the local node's lock, as `make bench` does:
//
//	bash kind/nodelock.sh bash -c 'bash kind/localnode/up.sh &&
//	  BENCH_BINARY=$PWD/bin/csi-registrar go test -tags bench -run TestBenchKubelet -v ./kind/e2e'
//
// CSINode is followed with `kubectl get csinode <node> --watch -o json`
// (started before the clock, so each change is seen when the API server
// sends it). Rows are appended to BENCH_RESULTS as in cmd/csi-registrar's
// process_bench_test.go. UPSTREAM_REGISTRAR adds upstream's column.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	kubeletRoot     = "/var/lib/kubelet"
	pluginsRegistry = kubeletRoot + "/plugins_registry"
	benchPrefix     = "bench-" // every driver name this file registers starts with it
	benchSuffix     = ".csi.example.com"
)

// ---------------------------------------------------------------------------
// Environment

// loadLocalEnv reads the local node's environment (readLocalEnv) and checks
// that the node is up.
func loadLocalEnv(t *testing.T) localEnv {
	t.Helper()
	e, err := readLocalEnv("../localnode")
	if err != nil {
		t.Fatalf("%v; is the local node up (bash kind/localnode/up.sh, see kind/localnode/README.md)?", err)
	}
	if _, err := os.Stat(pluginsRegistry); err != nil {
		t.Fatalf("%s: %v; is the local node up (bash kind/localnode/up.sh)?", pluginsRegistry, err)
	}
	return e
}

type impl struct{ name, bin string }

func impls(t *testing.T) []impl {
	t.Helper()
	ours := os.Getenv("BENCH_BINARY")
	if ours == "" {
		t.Fatal("BENCH_BINARY must name the csi-registrar binary (make bench sets it)")
	}
	out := []impl{{"ours", ours}}
	if u := os.Getenv("UPSTREAM_REGISTRAR"); u != "" {
		out = append(out, impl{"upstream", u})
	}
	return out
}

func alternate(ims []impl, i int) []impl {
	if i%2 == 1 && len(ims) == 2 {
		return []impl{ims[1], ims[0]}
	}
	return ims
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// ---------------------------------------------------------------------------
// Processes

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = ownStateFile(t)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

// ownStateFile is this process's environment with a state file of its own
// for a csi-registrar started on the host (--state-file): the registrars
// side by side do not share the default /dev/shm path.
func ownStateFile(t *testing.T) []string {
	return append(os.Environ(), "CSI_REGISTRAR_STATE_FILE="+filepath.Join(t.TempDir(), "csi-registrar.state"))
}

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

// pair is one driver (host process) and its registrar.
type pair struct {
	name, sock string
	im         impl
	drv, reg   *proc
}

func newPair(t *testing.T, im impl, name string) *pair {
	t.Helper()
	dir := filepath.Join(kubeletRoot, "plugins", name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &pair{name: name, sock: filepath.Join(dir, "csi.sock"), im: im}
}

func (p *pair) regSock() string { return filepath.Join(pluginsRegistry, p.name+"-reg.sock") }

func (p *pair) startDriver(t *testing.T, ours string) {
	t.Helper()
	p.drv = start(t, ours, "driver", "--endpoint=unix://"+p.sock, "--driver-name="+p.name, "--node-id="+p.name+"-node")
}

func (p *pair) startRegistrar(t *testing.T) {
	t.Helper()
	args := []string{"--csi-address=" + p.sock, "--kubelet-registration-path=" + p.sock, "--plugin-registration-path=" + pluginsRegistry}
	if p.im.name == "ours" {
		args = append([]string{"register"}, args...)
	}
	p.reg = start(t, p.im.bin, args...)
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := os.Lstat(path); err == nil && st.Mode().Type() == os.ModeSocket {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// CSINode watch

type csinodeEvent struct {
	at      time.Time
	drivers map[string]bool
}

// csinodeWatch follows the node's CSINode through a kubectl watch.
type csinodeWatch struct {
	mu     sync.Mutex
	events []csinodeEvent
	more   chan struct{} // closed and replaced on each event
	cancel func()
}

func watchCSINode(t *testing.T, e localEnv) *csinodeWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, e.kubectl, "get", "csinode", e.node, "--watch", "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &csinodeWatch{more: make(chan struct{}), cancel: cancel}
	go func() {
		dec := json.NewDecoder(bufio.NewReader(out))
		for {
			var obj struct {
				Spec struct {
					Drivers []struct{ Name string }
				}
			}
			if err := dec.Decode(&obj); err != nil {
				if err != io.EOF && ctx.Err() == nil {
					fmt.Fprintln(os.Stderr, "csinode watch:", err)
				}
				return
			}
			ev := csinodeEvent{at: time.Now(), drivers: map[string]bool{}}
			for _, d := range obj.Spec.Drivers {
				ev.drivers[d.Name] = true
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			close(w.more)
			w.more = make(chan struct{})
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); cmd.Wait() })
	// The first event is the current object.
	if _, ok := w.waitFrom(0, 30*time.Second, func(map[string]bool) bool { return true }); !ok {
		t.Fatalf("no CSINode %s: is the kubelet up?", e.node)
	}
	return w
}

// mark returns the number of events so far: waitFrom(mark, …) looks only at
// later ones.
func (w *csinodeWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

// current reports the drivers in the latest event.
func (w *csinodeWatch) current() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) == 0 {
		return nil
	}
	return w.events[len(w.events)-1].drivers
}

// waitFrom returns the time of the first event at index ≥ from whose drivers
// satisfy cond. The event before from counts too when it already satisfies
// cond (then its time is returned).
func (w *csinodeWatch) waitFrom(from int, timeout time.Duration, cond func(map[string]bool) bool) (time.Time, bool) {
	deadline := time.After(timeout)
	for i := from; ; {
		w.mu.Lock()
		for ; i < len(w.events); i++ {
			if cond(w.events[i].drivers) {
				at := w.events[i].at
				w.mu.Unlock()
				return at, true
			}
		}
		more := w.more
		w.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			return time.Time{}, false
		}
	}
}

func hasAll(names []string) func(map[string]bool) bool {
	return func(d map[string]bool) bool {
		for _, n := range names {
			if !d[n] {
				return false
			}
		}
		return true
	}
}

func hasNone(names []string) func(map[string]bool) bool {
	return func(d map[string]bool) bool {
		for _, n := range names {
			if d[n] {
				return false
			}
		}
		return true
	}
}

// cleanNode stops nothing, but waits until no bench driver is listed and
// removes bench registration sockets nobody serves (left by a killed run).
func cleanNode(t *testing.T, w *csinodeWatch) {
	t.Helper()
	entries, _ := os.ReadDir(pluginsRegistry)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), benchPrefix) {
			os.Remove(filepath.Join(pluginsRegistry, e.Name()))
		}
	}
	_, ok := w.waitFrom(max(w.mark()-1, 0), 60*time.Second, func(d map[string]bool) bool {
		for n := range d {
			if strings.HasPrefix(n, benchPrefix) {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("bench drivers still listed in CSINode after 60 s: %v", w.current())
	}
}

// ---------------------------------------------------------------------------
// Results (same format as cmd/csi-registrar/process_bench_test.go)

type stats struct {
	n                 int
	min, median, max_ float64
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
	return stats{len(s), s[0], med, s[len(s)-1]}
}

func span(xs []float64) string {
	s := summarize(xs)
	if s.n == 0 {
		return "n/a"
	}
	if s.n == 1 || s.min == s.max_ {
		return fmt.Sprintf("%.2f s", s.median)
	}
	return fmt.Sprintf("%.2f s / %.2f s / %.2f s", s.min, s.median, s.max_)
}

// benchRecord logs a row of seconds and appends it to BENCH_RESULTS.
func benchRecord(t *testing.T, fig, what string, ours, up []float64, goal string, met func(stats) bool, upNote string) {
	t.Helper()
	o := summarize(ours)
	verdict := "-"
	if met != nil && o.n > 0 {
		verdict = "met"
		if !met(o) {
			verdict = "MISSED"
		}
	}
	upCol, ratio := "-", "-"
	if len(up) > 0 {
		upCol = span(up)
		if u := summarize(up); u.median > 0 && o.n > 0 {
			ratio = fmt.Sprintf("%.2f×", o.median/u.median)
		}
	}
	if upNote != "" {
		upCol = upNote
	}
	if goal == "" {
		goal = "-"
	}
	line := strings.Join([]string{fig, what, strconv.Itoa(o.n), span(ours), goal, verdict, upCol, ratio}, "\t")
	t.Logf("figure %s", strings.ReplaceAll(line, "\t", " | "))
	if p := os.Getenv("BENCH_RESULTS"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintln(f, line)
	}
}

func medianAtMost(s float64) func(stats) bool { return func(x stats) bool { return x.median <= s } }

// ---------------------------------------------------------------------------
// Figure 7: registrar start → CSINode lists the driver; registration socket
// removed (the registrar's SIGTERM) → the entry is gone.

func TestBenchKubeletRegistration(t *testing.T) {
	e := loadLocalEnv(t)
	ims := impls(t)
	runs := envInt("BENCH_RUNS", 10)
	w := watchCSINode(t, e)
	cleanNode(t, w)

	rw, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := rw.Add(pluginsRegistry); err != nil {
		t.Fatal(err)
	}
	removed := make(chan string, 16)
	go func() {
		for ev := range rw.Events {
			if ev.Has(fsnotify.Remove) {
				removed <- filepath.Base(ev.Name)
			}
		}
	}()

	pairs := map[string]*pair{}
	for _, im := range ims {
		p := newPair(t, im, benchPrefix+"reg-"+im.name+benchSuffix)
		p.startDriver(t, ims[0].bin)
		waitSocket(t, p.sock)
		pairs[im.name] = p
	}
	listed, gone := map[string][]float64{}, map[string][]float64{}
	rng := rand.New(rand.NewPCG(7, 1))
	for i := range runs {
		for _, im := range alternate(ims, i) {
			p := pairs[im.name]
			names := []string{p.name}
			// The kubelet acts on a 1 s reconciler tick. Without a random
			// pause each run would start at the same phase of it (just after
			// the tick that removed the previous entry).
			time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
			from := w.mark()
			t0 := time.Now()
			p.startRegistrar(t)
			t1, ok := w.waitFrom(from, 30*time.Second, hasAll(names))
			if !ok {
				t.Fatalf("%s: %s not listed in CSINode within 30 s", im.name, p.name)
			}
			listed[im.name] = append(listed[im.name], t1.Sub(t0).Seconds())
			for len(removed) > 0 {
				<-removed
			}
			from = w.mark()
			time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
			p.reg.stop() // both remove their socket on SIGTERM
			var t2 time.Time
			for t2.IsZero() {
				select {
				case n := <-removed:
					if n == filepath.Base(p.regSock()) {
						t2 = time.Now()
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the registration socket was not removed on SIGTERM", im.name)
				}
			}
			t3, ok := w.waitFrom(from, 30*time.Second, hasNone(names))
			if !ok {
				t.Fatalf("%s: %s still listed 30 s after its socket was removed", im.name, p.name)
			}
			gone[im.name] = append(gone[im.name], max(t3.Sub(t2), 0).Seconds())
		}
	}
	benchRecord(t, "7a", "real kubelet: registrar start → CSINode lists the driver", listed["ours"], listed["upstream"],
		"median ≤ 1.2 s", medianAtMost(1.2), "")
	benchRecord(t, "7b", "real kubelet: registration socket removed → CSINode entry gone", gone["ours"], gone["upstream"],
		"median ≤ 1.2 s", medianAtMost(1.2), "")
}

// ---------------------------------------------------------------------------
// Figure 8: N driver+registrar pairs (distinct names) started at once → all
// listed in CSINode; the curve for N = 1, 10, 50.

func TestBenchKubeletScale(t *testing.T) {
	e := loadLocalEnv(t)
	ims := impls(t)
	runs := envInt("BENCH_SCALE_RUNS", envInt("BENCH_RUNS", 10))
	w := watchCSINode(t, e)
	cleanNode(t, w)
	kubeletLog := filepath.Join(e.cache, "logs", "kubelet.log")

	rng := rand.New(rand.NewPCG(8, 1))
	for _, n := range []int{1, 10, 50} {
		all, half := map[string][]float64{}, map[string][]float64{}
		phases := map[string]map[string][]float64{"ours": {}, "upstream": {}}
		throttled := map[string][]float64{}
		for i := range runs {
			for _, im := range alternate(ims, i) {
				var pairs []*pair
				var names []string
				for j := range n {
					p := newPair(t, im, fmt.Sprintf("%sscale-%s-%02d%s", benchPrefix, im.name, j, benchSuffix))
					pairs = append(pairs, p)
					names = append(names, p.name)
				}
				time.Sleep(time.Duration(rng.Int64N(int64(time.Second)))) // a random phase of the reconciler's tick
				logStart := fileSize(kubeletLog)
				from := w.mark()
				t0 := time.Now()
				for _, p := range pairs {
					p.startDriver(t, ims[0].bin)
					p.startRegistrar(t)
				}
				t1, ok := w.waitFrom(from, 60*time.Second, hasAll(names))
				if !ok {
					t.Fatalf("%s N=%d: not all listed within 60 s; listed: %d", im.name, n, countListed(w.current(), names))
				}
				th, _ := w.waitFrom(from, time.Second, func(d map[string]bool) bool { return countListed(d, names)*2 >= n })
				all[im.name] = append(all[im.name], t1.Sub(t0).Seconds())
				half[im.name] = append(half[im.name], th.Sub(t0).Seconds())
				throttled[im.name] = append(throttled[im.name], float64(countIn(kubeletLog, logStart, "client-side throttling")))
				if ph := kubeletPhases(kubeletLog, logStart, names); len(ph) == len(phaseMarks) {
					for k, at := range ph {
						phases[im.name][k] = append(phases[im.name][k], at.Sub(t0).Seconds())
					}
				}
				t.Logf("%s N=%d run %d: all listed after %.2f s, half after %.2f s", im.name, n, i, t1.Sub(t0).Seconds(), th.Sub(t0).Seconds())
				if n == 50 && i == runs-1 {
					// The kubelet's side of the last run, for reading what limits it.
					if dir := os.Getenv("BENCH_RESULTS"); dir != "" {
						saveLog(kubeletLog, logStart, filepath.Join(filepath.Dir(dir), "kubelet-scale50-"+im.name+".log"))
					}
				}
				var wg sync.WaitGroup
				for _, p := range pairs {
					wg.Add(1)
					go func() { defer wg.Done(); p.reg.stop(); p.drv.stop() }()
				}
				wg.Wait()
				cleanNode(t, w)
			}
		}
		var goal string
		var met func(stats) bool
		if n == 50 {
			goal, met = "≤ 5 s in every run", func(s stats) bool { return s.max_ <= 5 }
		}
		benchRecord(t, fmt.Sprintf("8-%02d", n), fmt.Sprintf("real kubelet: %d pairs started at once → all in CSINode", n), all["ours"], all["upstream"], goal, met, "")
		for i, mark := range phaseMarks {
			if len(phases["ours"][mark.key]) > 0 && n > 1 {
				benchRecord(t, fmt.Sprintf("8-%02d%c", n, 'p'+i), fmt.Sprintf("real kubelet: %d pairs → %s (kubelet log)", n, mark.what),
					phases["ours"][mark.key], phases["upstream"][mark.key], "", nil, "")
			}
		}
		if n > 1 {
			benchRecord(t, fmt.Sprintf("8-%02dh", n), fmt.Sprintf("real kubelet: %d pairs → half of them in CSINode", n), half["ours"], half["upstream"], "", nil, "")
			th := summarize(throttled["ours"])
			t.Logf("N=%d: kubelet log lines about client-side throttling per run (ours): min %.0f, median %.0f, max %.0f",
				n, th.min, th.median, th.max_)
		}
	}
}

// phaseMarks are the kubelet log lines (klog, default verbosity) that mark
// how far each registration got: the plugin watcher saw the socket, the
// reconciler (1 s loop) started the registration, the CSI handler was called
// (GetInfo answered). What follows is NodeGetInfo and the API writes (Node
// annotation, CSINode), done by the kubelet's API client.
var phaseMarks = []struct{ key, what, text string }{
	{"watcher", "last socket seen by the plugin watcher", `"Adding socket path or updating timestamp to desired state cache" path="` + pluginsRegistry + "/"},
	{"reconciler", "last registration started by the reconciler", `"OperationExecutor.RegisterPlugin started" plugin={"SocketPath":"` + pluginsRegistry + "/"},
	{"handler", "last CSI handler call (GetInfo answered)", "kubernetes.io/csi: Register new plugin with name: "},
}

// kubeletPhases returns, for each phase, when the kubelet's log shows it for
// the last of names (lines after offset); phases not reached by all names are
// left out.
func kubeletPhases(logPath string, offset int64, names []string) map[string]time.Time {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	seen := map[string]map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for _, m := range phaseMarks {
			i := strings.Index(l, m.text)
			if i < 0 {
				continue
			}
			rest := l[i+len(m.text):]
			for _, n := range names {
				if strings.HasPrefix(rest, n+" ") || strings.HasPrefix(rest, n+"-reg.sock") {
					if at, ok := klogTime(l); ok {
						if seen[m.key] == nil {
							seen[m.key] = map[string]time.Time{}
						}
						if _, dup := seen[m.key][n]; !dup {
							seen[m.key][n] = at
						}
					}
				}
			}
		}
	}
	out := map[string]time.Time{}
	for k, byName := range seen {
		if len(byName) < len(names) {
			continue
		}
		var last time.Time
		for _, at := range byName {
			if at.After(last) {
				last = at
			}
		}
		out[k] = last
	}
	return out
}

// klogTime parses the time of a klog line ("I1121 13:43:13.973851 ...").
func klogTime(line string) (time.Time, bool) {
	if len(line) < 21 {
		return time.Time{}, false
	}
	ts, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	now := time.Now()
	return ts.AddDate(now.Year(), 0, 0), true
}

// saveLog copies what p got after offset to file.
func saveLog(p string, offset int64, file string) {
	f, err := os.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return
	}
	out, err := os.Create(file)
	if err != nil {
		return
	}
	defer out.Close()
	io.Copy(out, f)
}

func countListed(d map[string]bool, names []string) int {
	c := 0
	for _, n := range names {
		if d[n] {
			c++
		}
	}
	return c
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// countIn counts the lines of p after offset that contain s.
func countIn(p string, offset int64, s string) int {
	f, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0
	}
	c := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			c++
		}
	}
	return c
}
