//go:build k8s_1_35 || k8s_1_36

package pluginmanager

// The kubelet code of Kubernetes 1.35 and 1.36 (k8s-1.35.mod, k8s-1.36.mod):
// the caches and the plugin watcher take a context, the reconciler's Run
// does not (the plugin handler: shim_noctx_test.go).

import (
	"context"

	pmcache "k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/pluginwatcher"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/reconciler"
)

func startWatcher(ctx context.Context, w *pluginwatcher.Watcher, stop <-chan struct{}) error {
	return w.Start(ctx, stop)
}

func runReconciler(_ context.Context, rc reconciler.Reconciler, stop <-chan struct{}) { rc.Run(stop) }

func addDesired(ctx context.Context, dsw pmcache.DesiredStateOfWorld, path string) error {
	return dsw.AddOrUpdatePlugin(ctx, path)
}

func addActual(ctx context.Context, asw pmcache.ActualStateOfWorld, p pmcache.PluginInfo) error {
	return asw.AddPlugin(ctx, p)
}
