package doctor

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Driver is what a CSI endpoint answered.
type Driver struct {
	// Endpoint is the host path the kubelet dials.
	Endpoint string `json:"endpoint"`
	// Link is the endpoint's target when the endpoint is a symbolic link:
	// the handover's csi-endpoint.sock, which names the driver socket of
	// the instance the kubelet's calls reach now.
	Link string `json:"link,omitempty"`
	// Ready is Probe's answer; nil if Probe failed.
	Ready             *bool             `json:"ready,omitempty"`
	Name              string            `json:"name,omitempty"`
	VendorVersion     string            `json:"vendorVersion,omitempty"`
	NodeID            string            `json:"nodeID,omitempty"`
	MaxVolumesPerNode int64             `json:"maxVolumesPerNode,omitempty"`
	Topology          map[string]string `json:"topology,omitempty"`
}

// inspectDriver dials the CSI endpoint e's plugin announced, as the kubelet
// would, and calls Probe, GetPluginInfo and NodeGetInfo.
func (d *diagnosis) inspectDriver(ctx context.Context, e *Entry) {
	p := e.Plugin
	endpoint := p.Endpoint
	if endpoint == "" {
		endpoint = e.Path // the kubelet's rule: no endpoint means this same socket
	}
	subject := p.Name
	path, err := csiplugin.ParseEndpoint(endpoint)
	if err != nil {
		d.addf(SeverityError, subject, "set the registrar's --kubelet-registration-path to the driver socket's absolute host path, at most 107 bytes",
			"the endpoint %q announced by %s cannot be dialed by the kubelet: %v", endpoint, e.Path, err)
		return
	}
	drv := &Driver{Endpoint: path}
	e.Driver = drv
	if !d.dialable(path) {
		return
	}
	local := d.local(path)
	if t, err := os.Readlink(local); err == nil {
		drv.Link = t
		d.addf(SeverityInfo, subject, "nothing to do (crictl pods --id, or kubectl get pods -A -o wide, names a pod by its UID)",
			"the endpoint %s is a link to %s: %s", path, t, handoverText(t, e.Path, d.isSocket(filepath.Join(filepath.Dir(local), handoverRendezvous))))
	}
	st, err := os.Stat(local)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.addf(SeverityError, subject, "start the driver, or make --kubelet-registration-path match where the driver's socket is on the host (the hostPath of its socket directory)",
			"the endpoint %s announced by %s does not exist", path, e.Path)
		return
	case err != nil:
		d.addf(SeverityError, subject, "run doctor as root on the node", "cannot inspect the endpoint %s: %v", path, err)
		return
	case st.Mode().Type() != fs.ModeSocket:
		d.addf(SeverityError, subject, "point --kubelet-registration-path at the driver's socket",
			"the endpoint %s announced by %s is a %s, not a socket", path, e.Path, kindOf(st.Mode()))
		return
	}
	if err := dialCheck(local, d.opts.Timeout); err != nil {
		switch classifyDial(err) {
		case GetInfoStale:
			d.addf(SeverityError, subject, "the driver is not running: check its container (crictl ps -a) and restart it",
				"the driver's socket %s is stale: nobody listens on it (connection refused)", path)
		default:
			d.addf(SeverityError, subject, "check the driver's container (crictl ps -a, crictl logs)", "cannot connect to the driver at %s: %v", path, err)
		}
		return
	}
	conn, err := dialGRPC(local)
	if err != nil {
		d.addf(SeverityError, subject, "check the endpoint", "cannot dial %s: %v", path, err)
		return
	}
	defer conn.Close()
	ident, node := csi.NewIdentityClient(conn), csi.NewNodeClient(conn)
	failed := func(method, fix string, err error) {
		d.addf(SeverityError, subject, fix, "%s on %s failed: %v", method, path, err)
	}

	pr, err := within(ctx, d.opts.Timeout, func(c context.Context) (*csi.ProbeResponse, error) { return ident.Probe(c, &csi.ProbeRequest{}) })
	if err != nil {
		failed("Probe", "check the driver's log; a driver that does not answer Probe within --timeout is not serving", err)
		return
	}
	ready := pr.GetReady() == nil || pr.GetReady().GetValue() // unset means ready (CSI spec)
	drv.Ready = &ready
	if !ready {
		d.addf(SeverityWarning, subject, "wait for the driver to finish starting, or check its log", "the driver at %s reports not ready (Probe)", path)
	}

	info, err := within(ctx, d.opts.Timeout, func(c context.Context) (*csi.GetPluginInfoResponse, error) {
		return ident.GetPluginInfo(c, &csi.GetPluginInfoRequest{})
	})
	if err != nil {
		failed("GetPluginInfo", "check the driver's log", err)
	} else {
		drv.Name, drv.VendorVersion = info.GetName(), info.GetVendorVersion()
		if drv.Name != p.Name {
			d.addf(SeverityError, subject, "restart the registrar so that it asks the driver again (upstream node-driver-registrar never does), or fix --kubelet-registration-path if it points at another driver",
				"name mismatch: %s announces %q, but the driver at its endpoint %s calls itself %q", e.Path, p.Name, path, drv.Name)
		}
	}

	ni, err := within(ctx, d.opts.Timeout, func(c context.Context) (*csi.NodeGetInfoResponse, error) {
		return node.NodeGetInfo(c, &csi.NodeGetInfoRequest{})
	})
	if err != nil {
		failed("NodeGetInfo", "check the driver's log: the kubelet calls NodeGetInfo to register the driver and rejects it when the call fails", err)
		return
	}
	drv.NodeID, drv.MaxVolumesPerNode = ni.GetNodeId(), ni.GetMaxVolumesPerNode()
	drv.Topology = ni.GetAccessibleTopology().GetSegments()
	d.checkNodeInfo(subject, path, drv)
}

// checkNodeInfo checks NodeGetInfo's answer as the kubelet and the API
// server would, and against the node's name and labels.
func (d *diagnosis) checkNodeInfo(subject, path string, drv *Driver) {
	switch {
	case drv.NodeID == "":
		d.addf(SeverityError, subject, "give the driver its node ID, e.g. --node-id=$(KUBE_NODE_NAME) with KUBE_NODE_NAME from the downward API (spec.nodeName)",
			"NodeGetInfo on %s returns an empty node ID: the kubelet rejects the registration", path)
	case len(drv.NodeID) > csiplugin.MaxNodeIDLength:
		d.addf(SeverityError, subject, "shorten the driver's node ID",
			"NodeGetInfo's node ID is %d bytes long; the API server accepts at most %d in CSINode", len(drv.NodeID), csiplugin.MaxNodeIDLength)
	case d.opts.NodeName != "" && drv.NodeID != d.opts.NodeName:
		d.addf(SeverityInfo, subject, "right if the driver uses another identity (e.g. a cloud instance ID); otherwise pass --node-id=$(KUBE_NODE_NAME) (from spec.nodeName): a host name read inside a pod is the pod's name",
			"node ID %q is not the node name %q", drv.NodeID, d.opts.NodeName)
	}
	keys := slices.Sorted(maps.Keys(drv.Topology))
	for _, k := range keys {
		v := drv.Topology[k]
		if old, ok := d.nodeLabel(k); ok && old != v {
			d.addf(SeverityError, subject, "remove or correct the Node label (kubectl label node "+d.opts.NodeName+" "+k+"-), or fix the driver's topology",
				"topology segment %s=%s collides with the Node's label %s=%s: the kubelet rejects the registration", k, v, k, old)
		}
	}
}

// nodeLabel looks a label up in the options' labels, then in the Node
// object read from the API server.
func (d *diagnosis) nodeLabel(key string) (string, bool) {
	if v, ok := d.opts.NodeLabels[key]; ok {
		return v, true
	}
	if d.node != nil { // written before the sockets are inspected, read-only since
		v, ok := d.node.Labels[key]
		return v, ok
	}
	return "", false
}

// ParseLabels parses "k=v,k2=v2" (the kubelet's --node-labels form).
func ParseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return labels, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, badOption("node label", kv, "must be key=value", "write --node-labels=key=value,key2=value2")
		}
		labels[k] = v
	}
	return labels, nil
}

func badOption(what, value, rule, fix string) error {
	return &csiplugin.ValidationError{What: what, Value: value, Rule: rule, Fix: fix}
}

// within calls f with ctx bounded by timeout.
func within[T any](ctx context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx)
}

// handoverRendezvous is the socket over which the handover's instances pass
// the registration socket, beside the endpoint link.
const handoverRendezvous = ".csi-registrar-handover.sock"

// podSocket is a driver socket named by its pod's UID (the manifests'
// layout: /csi/$(POD_UID).sock).
var podSocket = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.sock$`)

// handoverText explains the endpoint link of the handover: whose driver the
// kubelet's calls reach (target, the link's), and who holds the
// registration socket reg (rendezvous: the rendezvous socket is there).
func handoverText(target, reg string, rendezvous bool) string {
	whose := "the driver listening on " + target
	if m := podSocket.FindStringSubmatch(target); m != nil {
		whose = "the driver of the pod with UID " + m[1]
	}
	msg := "the handover: the kubelet's calls reach " + whose + " now; the link follows the newest instance whose driver answers Probe, and falls back to another's when that one stops answering. "
	if rendezvous {
		return msg + "Every running instance holds the registration socket " + reg + " (one socket, bound once; its descriptor passes to each new instance over " + handoverRendezvous + "), and each answers GetInfo alike"
	}
	return msg + "No rendezvous " + handoverRendezvous + " beside the link: no instance can take over the registration socket " + reg + " from the one that bound it (a registrar that is not running, or one without the handover)"
}

// isSocket reports whether the local path is a socket.
func (d *diagnosis) isSocket(local string) bool {
	st, err := os.Stat(local)
	return err == nil && st.Mode().Type() == fs.ModeSocket
}
