package clusterstatus

import (
	"context"
	"fmt"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/nodeplugin"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watchSettle is how long Watch waits after a change for more changes
// before it answers again: a rollout changes many objects at once.
const watchSettle = 500 * time.Millisecond

// Watch answers once the caches are filled, then again after every change
// of the objects the answer depends on, calling report each time, until ctx
// ends (it then returns nil) or report returns an error. One watch per
// resource kind (informers), never a call per node.
//
// The first answer comes from one list per kind, as Status's; a kind that
// cannot be listed ends the watch with an error after it, since its
// informer would wait for it forever.
func Watch(ctx context.Context, client kubernetes.Interface, opts Options, report func(*Report) error) error {
	first, err := list(ctx, client, opts.Namespace)
	if err != nil {
		return nil // ctx ended
	}
	if err := report(answer(ctx, client, opts, first)); err != nil {
		return err
	}
	if len(first.Missing) > 0 {
		return fmt.Errorf("cannot watch: %d kind(s) cannot be listed (see above)", len(first.Missing))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace))
	nodes := factory.Core().V1().Nodes()
	csinodes := factory.Storage().V1().CSINodes()
	csidrivers := factory.Storage().V1().CSIDrivers()
	pods := factory.Core().V1().Pods()
	daemonsets := factory.Apps().V1().DaemonSets()

	// Keep only node plugin pods whole; of other pods, their names.
	if err := pods.Informer().SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			if _, plugin := nodeplugin.Recognize(p); !plugin {
				return &corev1.Pod{ObjectMeta: p.ObjectMeta}, nil
			}
			p.ManagedFields = nil
		}
		return obj, nil
	}); err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal(changed) },
		UpdateFunc: func(any, any) { signal(changed) },
		DeleteFunc: func(any) { signal(changed) },
	}
	for _, inf := range []cache.SharedIndexInformer{nodes.Informer(), csinodes.Informer(), csidrivers.Informer(), pods.Informer(), daemonsets.Informer()} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		factory.Shutdown() // waits for the informers' goroutines
	}()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch: the cache of %v did not fill", typ)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		select { // let a burst of changes settle
		case <-ctx.Done():
			return nil
		case <-time.After(watchSettle):
		}
		select {
		case <-changed:
		default:
		}
		snap := &Snapshot{Missing: map[string]bool{}, Namespace: opts.Namespace}
		all := labels.Everything()
		ns, _ := nodes.Lister().List(all)
		for _, n := range ns {
			snap.Nodes = append(snap.Nodes, *n)
		}
		cs, _ := csinodes.Lister().List(all)
		for _, c := range cs {
			snap.CSINodes = append(snap.CSINodes, *c)
		}
		ds, _ := csidrivers.Lister().List(all)
		for _, d := range ds {
			snap.CSIDrivers = append(snap.CSIDrivers, *d)
		}
		ps, _ := pods.Lister().List(all)
		for _, p := range ps {
			if _, ok := nodeplugin.Recognize(p); ok {
				snap.Pods = append(snap.Pods, *p)
			}
		}
		dss, _ := daemonsets.Lister().List(all)
		for _, d := range dss {
			snap.DaemonSets = append(snap.DaemonSets, *d)
		}
		if err := report(answer(ctx, client, opts, snap)); err != nil {
			return err
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
