//go:build k8s_1_34 || k8s_1_35 || k8s_1_36

package pluginmanager

// The plugin handler of Kubernetes 1.34 to 1.36: its methods take no
// context (1.37 added it).

import (
	"context"
	"time"

	pmcache "k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
	kubeletcsi "k8s.io/kubernetes/pkg/volume/csi"
)

// kubeletHandler is h as this kubelet's PluginHandler.
func kubeletHandler(h handler) pmcache.PluginHandler { return noContext{h} }

// theCSIPluginHandler is the CSI plugin's registration handler as a handler.
func theCSIPluginHandler() handler { return withContext{kubeletcsi.PluginHandler} }

type noContext struct{ h handler }

func (n noContext) ValidatePlugin(name, endpoint string, versions []string) error {
	return n.h.ValidatePlugin(context.TODO(), name, endpoint, versions)
}

func (n noContext) RegisterPlugin(name, endpoint string, versions []string, timeout *time.Duration) error {
	return n.h.RegisterPlugin(context.TODO(), name, endpoint, versions, timeout)
}

func (n noContext) DeRegisterPlugin(name, endpoint string) {
	n.h.DeRegisterPlugin(context.TODO(), name, endpoint)
}

type withContext struct{ h pmcache.PluginHandler }

func (w withContext) ValidatePlugin(_ context.Context, name, endpoint string, versions []string) error {
	return w.h.ValidatePlugin(name, endpoint, versions)
}

func (w withContext) RegisterPlugin(_ context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	return w.h.RegisterPlugin(name, endpoint, versions, timeout)
}

func (w withContext) DeRegisterPlugin(_ context.Context, name, endpoint string) {
	w.h.DeRegisterPlugin(name, endpoint)
}
