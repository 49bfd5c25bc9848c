//go:build !k8s_1_34 && !k8s_1_35 && !k8s_1_36

package pluginmanager

// The kubelet code of Kubernetes 1.37 (go.mod): the plugin handler's
// methods, the caches and the reconciler take a context.

import (
	"context"

	pmcache "k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/pluginwatcher"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/reconciler"
	kubeletcsi "k8s.io/kubernetes/pkg/volume/csi"
)

// kubeletHandler is h as this kubelet's PluginHandler: the same methods.
func kubeletHandler(h handler) pmcache.PluginHandler { return h }

// theCSIPluginHandler is the CSI plugin's registration handler as a handler.
func theCSIPluginHandler() handler { return kubeletcsi.PluginHandler }

func startWatcher(ctx context.Context, w *pluginwatcher.Watcher, stop <-chan struct{}) error {
	return w.Start(ctx, stop)
}

func runReconciler(ctx context.Context, rc reconciler.Reconciler, _ <-chan struct{}) { rc.Run(ctx) }

func addDesired(ctx context.Context, dsw pmcache.DesiredStateOfWorld, path string) error {
	return dsw.AddOrUpdatePlugin(ctx, path)
}

func addActual(ctx context.Context, asw pmcache.ActualStateOfWorld, p pmcache.PluginInfo) error {
	return asw.AddPlugin(ctx, p)
}
