// Package clusterstatus answers, for every CSI driver and every node of a
// cluster, whether the kubelet has the driver registered, and why not: the
// library of `kubectl csi-registrar status` (cmd/kubectl-csi_registrar).
//
// It reads one paginated list per resource kind (Nodes, CSINodes,
// CSIDrivers, Pods, DaemonSets), recognises node plugin pods by the shared
// rule of internal/nodeplugin, and only for nodes that are not registered
// asks, through the API server's proxy, the registrar's /readyz
// (csi-registrar) or the kubelet's plugin watcher metric and the pod's
// events (other registrars): with bounded concurrency, each call within a
// deadline that, when passed, is reported rather than waited on.
package clusterstatus

import (
	"fmt"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Options are the inputs of Status and Watch.
type Options struct {
	// Driver limits the answer to one driver; empty: every driver.
	Driver string
	// Namespace limits the node plugin pods and DaemonSets read; empty:
	// all namespaces.
	Namespace string
	// ProxyTimeout bounds each proxy call (and each events list).
	ProxyTimeout time.Duration
	// ProxyConcurrency is the most proxy calls in flight.
	ProxyConcurrency int
	// NoProxy: no proxy calls at all; reasons come from the lists only.
	NoProxy bool
}

// Defaults of Options.
const (
	DefaultProxyTimeout     = 5 * time.Second
	DefaultProxyConcurrency = 16
)

// Validate checks the options once; the error names the value, the rule and
// the fix.
func (o *Options) Validate() error {
	if o.Driver != "" {
		if err := csiplugin.ValidateDriverName(o.Driver); err != nil {
			return fmt.Errorf("DRIVER %q: %w; name a CSI driver as `kubectl get csidrivers` lists it", o.Driver, err)
		}
	}
	if o.ProxyTimeout <= 0 {
		return fmt.Errorf("--proxy-timeout=%s: must be positive, e.g. 5s", o.ProxyTimeout)
	}
	if o.ProxyConcurrency < 1 {
		return fmt.Errorf("--proxy-concurrency=%d: must be at least 1, e.g. %d", o.ProxyConcurrency, DefaultProxyConcurrency)
	}
	return nil
}
