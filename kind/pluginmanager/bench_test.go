package pluginmanager

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pmcache "k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/operationexecutor"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/reconciler"
)

// idleHandler is the handler of registrations that need nothing: the
// reconciler of a steady state calls none of its methods.
type idleHandler struct{ calls atomic.Int64 }

func (h *idleHandler) ValidatePlugin(context.Context, string, string, []string) error {
	h.calls.Add(1)
	return nil
}

func (h *idleHandler) RegisterPlugin(context.Context, string, string, []string, *time.Duration) error {
	h.calls.Add(1)
	return nil
}

func (h *idleHandler) DeRegisterPlugin(context.Context, string, string) { h.calls.Add(1) }

// gatedASW is the actual state whose reconciler rounds start one by one:
// each round's first call says it waits (the previous round ended), then
// waits for a token.
type gatedASW struct {
	pmcache.ActualStateOfWorld
	ctx     context.Context
	waiting chan struct{}
	tokens  chan struct{}
}

func (g *gatedASW) GetRegisteredPlugins() []pmcache.PluginInfo {
	select {
	case g.waiting <- struct{}{}:
	case <-g.ctx.Done():
		return nil
	}
	select {
	case <-g.tokens:
	case <-g.ctx.Done():
		return nil
	}
	return g.ActualStateOfWorld.GetRegisteredPlugins()
}

// round runs one reconciler round and returns when it ended.
func (g *gatedASW) round() {
	g.tokens <- struct{}{}
	<-g.waiting
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReconcile: what registrations the kubelet keeps cost its
// plugin manager, per reconciler round (the kubelet runs one a second):
// the real caches hold n registrations, each in the desired and the actual
// state with one UUID, as a retired announcement stays (the plugin watcher
// saw no Remove of its path), and the real reconciler runs round after
// round, each doing nothing but compare the states: for every registered
// entry it copies the whole desired state (GetPluginsToRegister), so the
// cost grows with n². Reported per round: the process's CPU time
// (cpu-ns/round, with the garbage collector's) and allocations.
func BenchmarkReconcile(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
			defer cancel()
			h := &idleHandler{}
			dsw := pmcache.NewDesiredStateOfWorld()
			asw := pmcache.NewActualStateOfWorld()
			for i := range n {
				path := fmt.Sprintf("/var/lib/kubelet/plugins_registry/bench.csi.test_%08x_%013d-reg.sock", i, 1795000000000+i)
				if err := addDesired(ctx, dsw, path); err != nil {
					b.Fatal(err)
				}
			}
			for _, p := range dsw.GetPluginsToRegister() {
				p.Handler, p.Name, p.Endpoint = kubeletHandler(h), "bench.csi.test", "/var/lib/kubelet/plugins/bench/csi.sock"
				if err := addActual(ctx, asw, p); err != nil {
					b.Fatal(err)
				}
			}
			g := &gatedASW{ActualStateOfWorld: asw, ctx: ctx, waiting: make(chan struct{}), tokens: make(chan struct{})}
			oe := operationexecutor.NewOperationExecutor(operationexecutor.NewOperationGenerator(&record.FakeRecorder{}))
			rc := reconciler.NewReconciler(oe, 0, dsw, g)
			rc.AddHandler("CSIPlugin", kubeletHandler(h))
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				runReconciler(ctx, rc, stop)
			}()
			<-g.waiting
			g.round() // warm
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				g.round()
			}
			cpu := cpuTime() - cpu0
			b.StopTimer()
			close(stop)
			cancel()
			<-done
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/round")
			if c := h.calls.Load(); c != 0 {
				b.Fatalf("the reconciler called the handler %d times: the state is not steady", c)
			}
			if got := len(asw.GetRegisteredPlugins()); got != n {
				b.Fatalf("the actual state holds %d entries after the rounds, want %d", got, n)
			}
		})
	}
}
