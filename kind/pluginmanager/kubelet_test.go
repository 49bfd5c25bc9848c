package pluginmanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pmcache "k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/operationexecutor"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/pluginwatcher"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/reconciler"
)

// handler is the kubelet's PluginHandler as Kubernetes 1.37 declares it
// (with a context); kubeletHandler and theCSIPluginHandler (shim_*_test.go)
// convert to and from the declaration of the minor under test.
type handler interface {
	ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error
	DeRegisterPlugin(ctx context.Context, name, endpoint string)
}

// kubeletPeriod is the kubelet's reconciler period (the plugin manager's
// loopSleepDuration).
const kubeletPeriod = time.Second

// kubeletPM is one run of the kubelet's plugin manager on a registration
// directory, built from its exported parts as pluginmanager.NewPluginManager
// builds it (a plugin watcher filling the desired state, one reconciler
// acting on the difference to the actual state through an operation
// executor), so that the tests hold its caches and count its rounds. Only
// the metrics registration is left out. Stop it and start another for a
// kubelet restart.
type kubeletPM struct {
	dsw    pmcache.DesiredStateOfWorld
	asw    *roundCounter
	oe     operationexecutor.OperationExecutor
	period time.Duration
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{}
}

// startPluginManager runs a plugin manager on dir whose reconciler runs
// every period (the kubelet's: kubeletPeriod).
func startPluginManager(t testing.TB, dir string, h handler, period time.Duration) *kubeletPM {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	k := &kubeletPM{
		dsw:    pmcache.NewDesiredStateOfWorld(),
		asw:    newRoundCounter(pmcache.NewActualStateOfWorld()),
		oe:     operationexecutor.NewOperationExecutor(operationexecutor.NewOperationGenerator(&record.FakeRecorder{})),
		period: period,
		cancel: cancel,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	rc := reconciler.NewReconciler(k.oe, period, k.dsw, k.asw)
	rc.AddHandler("CSIPlugin", kubeletHandler(h))
	if err := startWatcher(ctx, pluginwatcher.NewWatcher(dir, k.dsw), k.stop); err != nil {
		cancel()
		t.Fatalf("the kubelet's plugin watcher on %s: %v", dir, err)
	}
	go func() {
		defer close(k.done)
		runReconciler(ctx, rc, k.stop)
	}()
	t.Cleanup(k.halt)
	return k
}

// halt ends the plugin manager's watcher and reconciler (its operations
// in flight run to their end, as they would not in a killed kubelet).
func (k *kubeletPM) halt() {
	select {
	case <-k.stop:
		return
	default:
	}
	close(k.stop)
	k.cancel()
	<-k.done
}

// roundCounter is the plugin manager's actual state of the world, which
// counts the reconciler's rounds: each round starts with one
// GetRegisteredPlugins (reconciler.go), and nothing else of the kubelet
// calls it here (the metrics collector is not registered). The tests read
// the state through the embedded cache, which counts nothing.
type roundCounter struct {
	pmcache.ActualStateOfWorld
	mu     sync.Mutex
	rounds int64
	next   chan struct{} // closed when the next round starts
}

func newRoundCounter(asw pmcache.ActualStateOfWorld) *roundCounter {
	return &roundCounter{ActualStateOfWorld: asw, next: make(chan struct{})}
}

func (r *roundCounter) GetRegisteredPlugins() []pmcache.PluginInfo {
	r.mu.Lock()
	r.rounds++
	close(r.next)
	r.next = make(chan struct{})
	r.mu.Unlock()
	return r.ActualStateOfWorld.GetRegisteredPlugins()
}

func (r *roundCounter) now() (int64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rounds, r.next
}

// round returns the number of reconciler rounds started so far.
func (k *kubeletPM) round() int64 { r, _ := k.asw.now(); return r }

// waitRounds returns once n whole reconciler rounds ran after the call:
// whatever changed before the call, each of those rounds saw it. This is
// the observation window of the tests' "does not happen" proofs.
func (k *kubeletPM) waitRounds(t testing.TB, n int) {
	t.Helper()
	k.waitRound(t, k.round()+int64(n)+1)
}

// waitRound returns once round r started (rounds up to r-1 ended).
func (k *kubeletPM) waitRound(t testing.TB, r int64) {
	t.Helper()
	start := k.round()
	// A round is the reconcile (microseconds) and the period; the rest is
	// slack for a loaded machine.
	limit := time.Duration(r-start+1)*k.period + 30*time.Second
	deadline := time.After(limit)
	for {
		now, next := k.asw.now()
		if now >= r {
			return
		}
		select {
		case <-next:
		case <-deadline:
			t.Fatalf("the kubelet's reconciler reached round %d of %d in %s (period %s): is it stuck?", now, r, limit, k.period)
		}
	}
}

// ---- the kubelet's state, read directly ----------------------------------------------

// kubeletState is a snapshot of the plugin manager's caches.
type kubeletState struct {
	desired []pmcache.PluginInfo // DesiredStateOfWorld.GetPluginsToRegister
	actual  []pmcache.PluginInfo // ActualStateOfWorld.GetRegisteredPlugins
}

func (k *kubeletPM) state() kubeletState {
	return kubeletState{desired: k.dsw.GetPluginsToRegister(), actual: k.asw.ActualStateOfWorld.GetRegisteredPlugins()}
}

// registered returns the actual state's entries of the driver.
func (s kubeletState) registered(driver string) []pmcache.PluginInfo {
	var out []pmcache.PluginInfo
	for _, p := range s.actual {
		if p.Name == driver {
			out = append(out, p)
		}
	}
	return out
}

// retired returns the socket paths the actual state holds for the driver
// whose file is gone from the registration directory: registrations the
// kubelet keeps until it restarts (the plugin watcher saw no Remove of the
// path, so it stays in the desired state too, and the CSI handler is never
// told).
func (s kubeletState) retired(driver string) []string {
	var out []string
	for _, p := range s.registered(driver) {
		if _, err := os.Lstat(p.SocketPath); os.IsNotExist(err) {
			out = append(out, filepath.Base(p.SocketPath))
		}
	}
	slices.Sort(out)
	return out
}

// desiredOnly returns the desired state's socket paths that the actual
// state does not hold as registered (with that UUID): the reconciler
// dials each of them again, with its backoff, for as long as it stays
// (up to every 2 min 2 s, one error line each time).
func (s kubeletState) desiredOnly() []string {
	var out []string
	for _, d := range s.desired {
		if !slices.ContainsFunc(s.actual, func(a pmcache.PluginInfo) bool {
			return a.SocketPath == d.SocketPath && a.UUID == d.UUID
		}) {
			out = append(out, filepath.Base(d.SocketPath))
		}
	}
	slices.Sort(out)
	return out
}

// has reports whether the desired or the actual state holds the path.
func (s kubeletState) has(path string) (desired, actual bool) {
	desired = slices.ContainsFunc(s.desired, func(p pmcache.PluginInfo) bool { return p.SocketPath == path })
	actual = slices.ContainsFunc(s.actual, func(p pmcache.PluginInfo) bool { return p.SocketPath == path })
	return desired, actual
}

func (s kubeletState) String() string {
	var b strings.Builder
	line := func(which string, ps []pmcache.PluginInfo) {
		names := make([]string, 0, len(ps))
		for _, p := range ps {
			n := filepath.Base(p.SocketPath)
			if _, err := os.Lstat(p.SocketPath); os.IsNotExist(err) {
				n += " (gone)"
			}
			if p.Name != "" {
				n += " " + p.Name
			}
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(&b, "  %s (%d): %s\n", which, len(ps), strings.Join(names, ", "))
	}
	line("desired", s.desired)
	line("actual", s.actual)
	return b.String()
}

// operationPending reports whether the kubelet runs a register or
// unregister operation on the path now.
func (k *kubeletPM) operationPending(path string) bool {
	return k.oe.(interface{ IsOperationPending(string) bool }).IsOperationPending(path)
}
