// Package nodestatus makes a registrar's registration the node's storage
// readiness signal in the API server: a Node condition (True when the
// kubelet confirmed the registration and the driver answers), the removal of
// a startup taint once the kubelet's CSINode lists the driver, and a new
// registration when the API server lost what the kubelet wrote (the CSINode
// entry or the Node annotation), e.g. after the Node was deleted and
// re-created.
//
// It talks to the API server with a small REST client of its own (client.go;
// docs/design.md says why not client-go) and only when a Reporter runs: a
// registrar without the options set makes no API call and needs no token.
package nodestatus

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Options configure a Reporter. Condition or StartupTaint turns it on.
type Options struct {
	// NodeName is the Node this registrar runs on (the downward API's
	// spec.nodeName). Required when the reporter is on.
	NodeName string
	// Condition is the type of the Node condition to own, a qualified name
	// such as stub.csi.example.com/NodePluginRegistered. Empty: none.
	Condition string
	// StartupTaint is the key of the taint to remove from the Node once the
	// condition holds and the CSINode lists the driver. Empty: none.
	StartupTaint string
	// Handover: the registrar runs the handover (--rolling-update). A new
	// instance then starts beside the one that holds the registration and
	// takes it over once its own driver answers; until it has identified
	// its driver (registrar.Status.DriverName empty) it cannot look the
	// registration up, and leaves another instance's fresh True alone
	// instead of writing its "waiting for driver" as False.
	Handover bool
	// Heartbeat is how often the condition's lastHeartbeatTime is written
	// while nothing changes. Default DefaultHeartbeat.
	Heartbeat time.Duration
	// Client talks to the API server. Default: InClusterClient, made by New.
	Client *Client
	// Logger receives one line per event. Default slog.Default().
	Logger *slog.Logger
}

// DefaultHeartbeat is the Node Problem Detector's default
// (--k8s-exporter-heartbeat-period) and the registrar's reconcile period:
// one write per 5 minutes keeps the idle cost of the feature near nothing.
const DefaultHeartbeat = 5 * time.Minute

// MinHeartbeat: the condition is written at every change anyway; a
// heartbeat more often than this only loads the API server.
const MinHeartbeat = 10 * time.Second

// Enabled reports whether the options ask for a Reporter at all.
func (o Options) Enabled() bool { return o.Condition != "" || o.StartupTaint != "" }

// Validate checks the options as New does, without creating anything.
func (o Options) Validate() error {
	if o.Condition != "" {
		if err := ValidateQualifiedName("Node condition type", o.Condition,
			"use <driver-name>/<Name>, e.g. stub.csi.example.com/NodePluginRegistered"); err != nil {
			return err
		}
	}
	if o.StartupTaint != "" {
		if err := ValidateQualifiedName("startup taint key", o.StartupTaint,
			"use the key the node was registered with, e.g. stub.csi.example.com/agent-not-ready"); err != nil {
			return err
		}
	}
	if o.Enabled() {
		if o.NodeName == "" {
			return &csiplugin.ValidationError{What: "node name", Value: o.NodeName, Rule: "must be set when a Node condition or a startup taint is",
				Fix: "set KUBE_NODE_NAME from the downward API (fieldRef spec.nodeName), or --node-name"}
		}
		if !csiplugin.IsDNSSubdomain(o.NodeName) || len(o.NodeName) > 253 {
			return &csiplugin.ValidationError{What: "node name", Value: o.NodeName,
				Rule: "must be a lower-case DNS subdomain of at most 253 characters, as Node names are",
				Fix:  "set KUBE_NODE_NAME from the downward API (fieldRef spec.nodeName)"}
		}
	}
	if o.Heartbeat != 0 && o.Heartbeat < MinHeartbeat {
		return &csiplugin.ValidationError{What: "heartbeat period", Value: o.Heartbeat.String(),
			Rule: fmt.Sprintf("must be at least %s", MinHeartbeat), Fix: "leave it unset for the default of 5m"}
	}
	return nil
}

// ValidateQualifiedName checks s as Kubernetes checks a label key, a taint
// key or a condition type a controller matches on: an optional prefix that
// is a lower-case DNS subdomain of at most 253 characters and a '/', then a
// name of 1-63 characters, alphanumeric at both ends, with '-', '_' and '.'
// between. what names the value in the error, fix says what to use instead.
func ValidateQualifiedName(what, s, fix string) error {
	bad := func(rule string) error { return &csiplugin.ValidationError{What: what, Value: s, Rule: rule, Fix: fix} }
	prefix, name, hasPrefix := strings.Cut(s, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix && (prefix == "" || len(prefix) > 253 || !csiplugin.IsDNSSubdomain(prefix)) {
		return bad("must be [prefix/]name, and its prefix must be a lower-case DNS subdomain of at most 253 characters")
	}
	if strings.Contains(name, "/") {
		return bad("must be [prefix/]name with at most one '/'")
	}
	if name == "" || len(name) > 63 || !csiplugin.IsAlnum(name[0]) || !csiplugin.IsAlnum(name[len(name)-1]) {
		return bad("its name (after the '/') must be 1-63 characters, alphanumeric at both ends")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !csiplugin.IsAlnum(c) && c != '-' && c != '_' && c != '.' {
			return bad(fmt.Sprintf("its name contains %q; only letters, digits, '-', '_' and '.' are allowed", c))
		}
	}
	return nil
}
