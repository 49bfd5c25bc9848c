package pluginmanager

// What the rolling-update mode leaves in the kubelet (issue 36, item 1):
// at most one retired registration per handover in the actual state, and
// no socket path in the desired state only, which the kubelet would dial
// again and again. Each test reads the plugin manager's caches directly.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
)

var (
	handovers  = flag.Int("handovers", 200, "TestHandoverHygiene: handovers in all")
	chains     = flag.Int("handover-chains", 10, "TestHandoverHygiene: drivers rolling at once, each its share of -handovers")
	chainRound = flag.Duration("handover-period", hygienePeriod, "TestHandoverHygiene: the kubelet's reconciler period (the kubelet's own: 1s)")
	chainLogs  = flag.Bool("handover-logs", false, "TestHandoverHygiene: the registrars' and the kubelet's log lines in the test's log (thousands)")
)

// hygienePeriod is the kubelet's reconciler period where many handovers
// run: 200 at the kubelet's 1 s would mostly wait for its rounds.
const hygienePeriod = 50 * time.Millisecond

// dialFailures counts the kubelet's "dial failed" lines of a socket path:
// each is one registration attempt at a path nothing serves.
func (w *world) dialFailures(path string) int {
	return w.klog.count("dial failed at socket " + path)
}

// registeredNow reports whether the kubelet's actual state holds path and
// no operation on it runs (its NotifyRegistrationStatus was answered).
func (w *world) registeredNow(path string) bool {
	_, actual := w.pm.state().has(path)
	return actual && !w.pm.operationPending(path)
}

// settleDial waits until the kubelet runs no operation on path, then n
// reconciler rounds: a dial in flight (up to 10 s on a dead socket) has
// ended and logged.
func (w *world) settleDial(t *testing.T, path string, n int) {
	t.Helper()
	w.eventually(30*time.Second, "the kubelet's operation on "+filepath.Base(path)+" ended", func() bool {
		return !w.pm.operationPending(path)
	})
	w.pm.waitRounds(t, n)
}

// rollingInstance is a registrar of a chain, run from the chain's goroutine.
type rollingInstance struct {
	label  string
	d      *driver
	r      *registrar.Registrar
	cancel context.CancelFunc
	done   chan error
}

// chain is one driver rolled over and over: each handover starts a newer
// pod's instance, waits until the kubelet holds its endpoint and the
// older one stands by, and ends the older one (SIGTERM) and its driver.
type chain struct {
	w       *world
	name    string
	log     *testLog
	cur     *rollingInstance
	started []*rollingInstance
}

func (c *chain) start(label string) (*rollingInstance, error) {
	d := startDriver(c.w.t, filepath.Join(c.w.dir, label), c.name, false)
	opts := registrarOptions(d, c.w.reg, "pod-"+label)
	opts.Logger = slog.New(slog.NewTextHandler(c.log, &slog.HandlerOptions{}))
	r, err := registrar.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	i := &rollingInstance{label: label, d: d, r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { i.done <- r.Run(ctx) }()
	c.started = append(c.started, i)
	return i, nil
}

func (i *rollingInstance) stop() error {
	if i.cancel == nil {
		return nil
	}
	i.cancel()
	i.cancel = nil
	defer i.d.srv.Stop()
	select {
	case err := <-i.done:
		if err != nil {
			return fmt.Errorf("registrar %s: Run: %w", i.label, err)
		}
		return nil
	case <-time.After(20 * time.Second):
		return fmt.Errorf("registrar %s did not stop within 20s", i.label)
	}
}

// heldEndpoint is the endpoint the CSI handler holds for the driver.
func heldEndpoint(name string) string {
	d, ok := kubeletDrivers.Get(name)
	if !ok {
		return ""
	}
	return fieldString(d, "endpoint")
}

func poll(d time.Duration, what func() string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", d, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// handover starts the next instance and ends the current one.
func (c *chain) handover(label string) error {
	next, err := c.start(label)
	if err != nil {
		return err
	}
	if err := poll(registerWait, func() string {
		return fmt.Sprintf("%s registered and held by the kubelet (stage %v, kubelet's endpoint %s)", label, next.r.Status().Stage, heldEndpoint(c.name))
	}, func() bool {
		return next.r.Status().Stage == registrar.StageRegistered && heldEndpoint(c.name) == next.d.sock
	}); err != nil {
		return err
	}
	if c.cur != nil {
		prev := c.cur
		if err := poll(registerWait, func() string {
			return fmt.Sprintf("%s standing by (stage %v)", prev.label, prev.r.Status().Stage)
		}, func() bool { return prev.r.Status().Stage == registrar.StageStandingBy }); err != nil {
			return err
		}
		if err := prev.stop(); err != nil {
			return err
		}
	}
	c.cur = next
	return nil
}

// TestHandoverHygiene: after -handovers handovers (10 drivers rolling at
// once, the kubelet's reconciler every 50 ms: -handover-period), the kubelet's actual state
// holds at most one retired registration per handover of each driver,
// each driver's live announcement is registered, nothing is in the
// desired state only, and the kubelet never unregistered a driver.
func TestHandoverHygiene(t *testing.T) {
	w := newWorldPeriod(t, "h0.csi.test", *chainRound)
	quiet := func(l *testLog) *testLog {
		if !*chainLogs {
			l.mu.Lock()
			l.t = nil // kept for counting, not logged
			l.mu.Unlock()
		}
		return l
	}
	quiet(w.klog)
	n, k := *handovers, *chains
	if k < 1 || n < k {
		t.Fatalf("-handovers %d over -handover-chains %d: want at least one handover per chain", n, k)
	}
	cs := make([]*chain, k)
	for i := range cs {
		cs[i] = &chain{w: w, name: fmt.Sprintf("h%d.csi.test", i), log: quiet(newTestLog(t, fmt.Sprintf("registrars h%d: ", i)))}
	}
	t.Cleanup(func() {
		// At once: an instance alone waits for a successor before it leaves.
		var wg sync.WaitGroup
		for _, c := range cs {
			for _, ri := range c.started {
				wg.Go(func() { _ = ri.stop() })
			}
		}
		wg.Wait()
	})
	per := make([]int, k)
	for i := range n {
		per[i%k]++
	}
	start := time.Now()
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			// The first instance, then per[i] handovers.
			for j := 0; j <= per[i]; j++ {
				if err := c.handover(fmt.Sprintf("c%d-%d", i, j)); err != nil {
					errs[i] = fmt.Errorf("%s, handover %d: %w", c.name, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d handovers of %d drivers in %s (kubelet period %s)", n, k, time.Since(start).Round(time.Second), *chainRound)
	w.pm.waitRounds(t, settleRounds)

	ks := w.pm.state()
	total := 0
	for i, c := range cs {
		retired := ks.retired(c.name)
		total += len(retired)
		if len(retired) > per[i] {
			t.Errorf("after %d handovers of %s the kubelet's actual state holds %d retired registrations of it, want at most %d (one per handover)",
				per[i], c.name, len(retired), per[i])
		}
		live := ownSockets(w, "pod-"+c.cur.label)
		if len(live) != 1 {
			t.Errorf("%s's current instance %s has %d announcement sockets, want 1: %v", c.name, c.cur.label, len(live), live)
		} else if _, actual := ks.has(filepath.Join(w.reg, live[0])); !actual {
			t.Errorf("the kubelet's actual state does not hold %s's live announcement %s", c.name, live[0])
		}
		if g := gaps(w.kubelet.csiNodeWrites(c.name, w.from)); g != 0 {
			t.Errorf("the CSINode lost %s %d times during its handovers, want never", c.name, g)
		}
	}
	t.Logf("the kubelet's state after %d handovers: %d actual (%d retired), %d desired", n, len(ks.actual), total, len(ks.desired))
	if d := ks.desiredOnly(); len(d) != 0 {
		t.Errorf("after %d handovers %d paths are in the kubelet's desired state only (it dials them again and again): %v", n, len(d), d)
	}
	if c := w.h.count("deregister", "", time.Time{}); c != 0 {
		t.Errorf("the kubelet called DeRegisterPlugin %d times during %d handovers, want 0", c, n)
	}
	if t.Failed() {
		t.Logf("the kubelet's state:\n%s", ks)
	}
}

// bootTime is the node's boot time (btime in /proc/stat).
func bootTime(t *testing.T) time.Time {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("/proc/stat: btime %q: %v", v, err)
			}
			return time.Unix(s, 0)
		}
	}
	t.Fatal("/proc/stat has no btime")
	return time.Time{}
}

// deadAnnouncement runs instance label of pod in a child process until the
// kubelet holds its endpoint, then kills it (SIGKILL) with its driver: its
// announcement stays on disk, dead. It returns the socket's path.
func deadAnnouncement(t *testing.T, w *world, label, pod string) string {
	t.Helper()
	d := w.driver(label, false)
	c := startChild(t, label, registrarOptions(d, w.reg, pod))
	w.waitEndpoint(registerWait, label)
	var own []string
	w.eventually(registerWait, label+" with one announcement, registered by the kubelet (operation ended)", func() bool {
		own = ownSockets(w, pod)
		return len(own) == 1 && w.registeredNow(filepath.Join(w.reg, own[0]))
	})
	c.kill()
	d.srv.Stop()
	path := filepath.Join(w.reg, own[0])
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("%s's announcement after SIGKILL: %v (want it left behind)", label, err)
	}
	return path
}

// restartKubelet stops the plugin manager and starts another on the same
// directory: the caches and the CSI handler's memory of the driver are
// lost, the API objects stay.
func (w *world) restartKubelet(t *testing.T) {
	w.pm.halt()
	kubeletDrivers.Delete(w.name)
	w.pm = startPluginManager(t, w.reg, w.h, w.pm.period)
}

// TestRebootDeadAnnouncement: the node reboots while A holds the
// registration. A's last announcement is a dead socket on disk, created
// before the boot; the kubelet starts, adds it to its desired state and
// dials it; A's pod starts again (same pod UID). The kubelet must dial the
// dead path at most once and not keep it in its desired state.
func TestRebootDeadAnnouncement(t *testing.T) {
	w := newWorld(t, "reboot.csi.test")
	dead := deadAnnouncement(t, w, "a", "pod-a")
	// The reboot: everything before it is older than the boot.
	before := bootTime(t).Add(-time.Hour)
	if err := os.Chtimes(dead, before, before); err != nil {
		t.Fatal(err)
	}
	w.restartKubelet(t)
	mark := time.Now()
	startInstance(t, "a'", w.driver("a2", false), w.reg, "pod-a")
	w.waitEndpoint(registerWait, "a2")
	w.settleDial(t, dead, settleRounds)

	ks := w.pm.state()
	desired, actual := ks.has(dead)
	if desired {
		t.Errorf("after the reboot the dead announcement %s stays in the kubelet's desired state: it dials it again and again (%d dial failures so far)",
			filepath.Base(dead), w.dialFailures(dead))
	}
	if actual {
		t.Errorf("the kubelet registered the dead announcement %s", filepath.Base(dead))
	}
	if n := w.dialFailures(dead); n > 1 {
		t.Errorf("the kubelet failed to dial the dead announcement %d times, want at most 1", n)
	}
	if d := ks.desiredOnly(); len(d) != 0 {
		t.Errorf("after the reboot %d paths are in the kubelet's desired state only: %v\n%s", len(d), d, ks)
	}
	if n := w.h.count("deregister", "", mark); n != 0 {
		t.Errorf("the kubelet called DeRegisterPlugin %d times after the reboot, want 0", n)
	}
}

// TestKubeletRestartDeadLeftovers: A's registrar is killed (SIGKILL) while
// B holds the registration and A's pod is gone for good: A's announcement
// stays on disk, dead. Then the kubelet restarts and walks the directory.
// It must dial the dead path at most once and not keep it in its desired
// state, while B stays registered.
func TestKubeletRestartDeadLeftovers(t *testing.T) {
	w := newWorld(t, "leftover.csi.test")
	ad := w.driver("a", false)
	a := startChild(t, "a", registrarOptions(ad, w.reg, "pod-a"))
	w.waitEndpoint(registerWait, "a")
	b := startInstance(t, "b", w.driver("b", false), w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "b")
	var aOwn []string
	w.eventually(registerWait, "A with one announcement, registered by the kubelet (operation ended)", func() bool {
		aOwn = ownSockets(w, "pod-a")
		return len(aOwn) == 1 && w.registeredNow(filepath.Join(w.reg, aOwn[0]))
	})
	a.kill()
	ad.srv.Stop()
	dead := filepath.Join(w.reg, aOwn[0])
	w.pm.waitRounds(t, settleRounds)
	if _, err := os.Lstat(dead); err != nil {
		t.Logf("A's announcement is gone before the kubelet restarts (%v): no leftover to test", err)
	}
	w.waitEndpoint(registerWait, "b")

	mark := time.Now()
	w.restartKubelet(t)
	w.waitEndpoint(registerWait, "b")
	w.settleDial(t, dead, settleRounds)

	ks := w.pm.state()
	if desired, _ := ks.has(dead); desired {
		t.Errorf("after the kubelet restart the dead leftover %s stays in its desired state: it dials it again and again (%d dial failures so far)",
			filepath.Base(dead), w.dialFailures(dead))
	}
	if n := w.dialFailures(dead); n > 1 {
		t.Errorf("the restarted kubelet failed to dial the dead leftover %d times, want at most 1", n)
	}
	if d := ks.desiredOnly(); len(d) != 0 {
		t.Errorf("after the kubelet restart %d paths are in its desired state only: %v\n%s", len(d), d, ks)
	}
	if n := w.h.count("deregister", "", mark); n != 0 {
		t.Errorf("the restarted kubelet called DeRegisterPlugin %d times, want 0", n)
	}
	if st := b.r.Status().Stage; st != registrar.StageRegistered {
		t.Errorf("B is at stage %v, want %v", st, registrar.StageRegistered)
	}
}

// TestSuccessorDeletedAsItStarts: A holds the registration; B's pod is
// deleted (SIGTERM) the moment its first announcement appears. A keeps or
// takes back the registration; the kubelet holds at most one retired
// registration for this rollout and nothing in its desired state only.
func TestSuccessorDeletedAsItStarts(t *testing.T) {
	w := newWorld(t, "deleted.csi.test")
	a := startInstance(t, "a", w.driver("a", false), w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "a")

	bd := w.driver("b", false)
	b := startInstance(t, "b", bd, w.reg, "pod-b")
	w.eventually(registerWait, "B's first announcement", func() bool { return len(ownSockets(w, "pod-b")) > 0 })
	b.stop(t)
	bd.srv.Stop()

	w.waitEndpoint(registerWait, "a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	w.pm.waitRounds(t, settleRounds)

	ks := w.pm.state()
	if r := ks.retired(w.name); len(r) > 1 {
		t.Errorf("after one rollout (its successor deleted) the kubelet's actual state holds %d retired registrations, want at most 1: %v\n%s", len(r), r, ks)
	}
	if d := ks.desiredOnly(); len(d) != 0 {
		t.Errorf("%d paths are in the kubelet's desired state only (it dials them again and again): %v\n%s", len(d), d, ks)
	}
	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times, want never", g)
	}
	if n := w.h.count("deregister", "", time.Time{}); n != 0 {
		t.Errorf("the kubelet called DeRegisterPlugin %d times, want 0", n)
	}
	if got := w.endpoint(); got != "a" {
		t.Errorf("the CSI handler holds %q, want a", got)
	}
}
