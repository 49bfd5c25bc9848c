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
//
// Errors: Options.Validate returns a *csiplugin.ValidationError naming the
// input as Options.Names says (a command's flag), else by its field
// (Options.ProxyTimeout, Options.Format, …). Status returns an error only when ctx ends;
// Watch returns report's error, or an error when it cannot watch (a kind
// cannot be listed, or its cache did not fill). What cannot be read is
// otherwise in Report.Unknown.
package clusterstatus

import (
	"errors"
	"strconv"
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
	// Format is the output format the caller's Printer writes (Output*),
	// checked with the rest.
	Format string
	// Names are what the errors call the inputs (a command: its flags and
	// argument); an input without a name here is called by its field.
	Names map[Option]string
	// KubeletState: read the kubelet's /metrics of every node where the
	// driver runs (one node proxy call per node, `get nodes/proxy`) and
	// show the registration paths the kubelet holds (Node.Kubelet).
	KubeletState bool
}

// Defaults of Options.
const (
	DefaultProxyTimeout     = 5 * time.Second
	DefaultProxyConcurrency = 16
)

// Validate checks the options once. An error is a
// *csiplugin.ValidationError naming the input, the value, the rule and the
// fix.
func (o *Options) Validate() error {
	if o.Driver != "" {
		var ve *csiplugin.ValidationError
		if err := csiplugin.ValidateDriverName(o.Driver); errors.As(err, &ve) {
			return &csiplugin.ValidationError{What: o.name(OptionDriver), Value: o.Driver, Rule: ve.Rule,
				Fix: "name a CSI driver as `kubectl get csidrivers` lists it"}
		}
	}
	if o.ProxyTimeout <= 0 {
		return &csiplugin.ValidationError{What: o.name(OptionProxyTimeout), Value: o.ProxyTimeout.String(), Rule: "must be positive",
			Fix: "use a duration such as " + DefaultProxyTimeout.String()}
	}
	if o.ProxyConcurrency < 1 {
		return &csiplugin.ValidationError{What: o.name(OptionProxyConcurrency), Value: strconv.Itoa(o.ProxyConcurrency), Rule: "must be at least 1",
			Fix: "use e.g. " + strconv.Itoa(DefaultProxyConcurrency)}
	}
	switch o.Format {
	case OutputTable, OutputWide, OutputJSON, OutputYAML:
	default:
		return &csiplugin.ValidationError{What: o.name(OptionFormat), Value: o.Format, Rule: "is not an output format",
			Fix: "use wide, json or yaml (or none for the table)"}
	}
	return nil
}
