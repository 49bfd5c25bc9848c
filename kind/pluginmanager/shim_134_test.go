//go:build k8s_1_34

package pluginmanager

// The kubelet code of Kubernetes 1.34 (k8s-1.34.mod): neither the caches,
// the plugin watcher nor the reconciler's Run take a context (the plugin
// handler: shim_noctx_test.go).

import (
	"context"

	pmcache "k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/pluginwatcher"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/reconciler"
)

func startWatcher(_ context.Context, w *pluginwatcher.Watcher, stop <-chan struct{}) error {
	return w.Start(stop)
}

func runReconciler(_ context.Context, rc reconciler.Reconciler, stop <-chan struct{}) { rc.Run(stop) }

func addDesired(_ context.Context, dsw pmcache.DesiredStateOfWorld, path string) error {
	return dsw.AddOrUpdatePlugin(path)
}

func addActual(_ context.Context, asw pmcache.ActualStateOfWorld, p pmcache.PluginInfo) error {
	return asw.AddPlugin(p)
}
