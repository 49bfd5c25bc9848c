package drivercases

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
)

// nodeExpect is what the kubelet must write for the driver on one node.
type nodeExpect struct {
	nodeID       string
	topology     map[string]string // the Node labels; nil when not asked
	topologyKeys []string          // sorted, as the kubelet sorts them
	maxVolumes   int64
	// asked: from the driver's own NodeGetInfo on the node. Otherwise (a
	// provider that cannot dial the node) from what the kubelet wrote, so
	// only its consistency is checked.
	asked bool
}

func (e nodeExpect) String() string {
	if !e.asked {
		return fmt.Sprintf("nodeID %q (as the annotation says: NodeGetInfo cannot be asked on this provider)", e.nodeID)
	}
	return fmt.Sprintf("nodeID %q, topology %v, max volumes %d (the driver's NodeGetInfo on the node)", e.nodeID, e.topology, e.maxVolumes)
}

// expect learns what the kubelet must write on node: from the driver's
// NodeGetInfo on its socket on the node (the registration path, as the
// kubelet calls it), else from what the kubelet wrote.
func (s *suite) expect(ctx context.Context, node string) (nodeExpect, error) {
	d, cl := s.d, s.cl
	var e nodeExpect
	if cl.Dialer != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		endpoint := d.spec.RegistrationPath
		if strings.Contains(endpoint, "$(") || d.rolling() { // set from a field, or the pod's own: ask the registration socket
			name, err := s.currentRegSocket(cctx, node)
			if err != nil {
				return e, err
			}
			info, err := RegistrationInfo(cctx, cl.Dialer, node, PluginsRegistry+"/"+name)
			if err != nil {
				return e, err
			}
			endpoint = info.Endpoint
		}
		di, err := AskDriver(cctx, cl.Dialer, node, endpoint)
		if err != nil {
			return e, err
		}
		if di.Name != d.name {
			return e, fmt.Errorf("the driver at %s on %s calls itself %q (GetPluginInfo), the suite expects %q (%s)", endpoint, node, di.Name, d.name, d.nameFrom)
		}
		ni := di.Node
		e = nodeExpect{nodeID: ni.GetNodeId(), maxVolumes: ni.GetMaxVolumesPerNode(), asked: true, topology: map[string]string{}}
		for k, v := range ni.GetAccessibleTopology().GetSegments() {
			e.topology[k] = v
			e.topologyKeys = append(e.topologyKeys, k)
		}
		sort.Strings(e.topologyKeys)
		if e.nodeID == "" {
			return e, fmt.Errorf("the driver's NodeGetInfo on %s returns an empty node_id: the kubelet refuses to register it (CSINode nodeID is required)", node)
		}
		return e, nil
	}
	r, err := cl.Registered(ctx, node, d.name)
	if err != nil {
		return e, err
	}
	if !r.Annotated || r.Annotation == "" {
		return e, fmt.Errorf("node %s: annotation %s has no node ID for %s", node, csiplugin.NodeIDAnnotation, d.name)
	}
	e.nodeID = r.Annotation
	if len(r.Entries) == 1 {
		e.topologyKeys = r.Entries[0].TopologyKeys
	}
	return e, nil
}

// entryProblems compares the node's CSINode entries for the driver with e.
func (d *driverUnderTest) entryProblems(r Registration, node string, e nodeExpect) []string {
	if len(r.Entries) != 1 {
		return []string{fmt.Sprintf("CSINode %s has %d entries for %s, want 1", node, len(r.Entries), d.name)}
	}
	x := r.Entries[0]
	var p []string
	if x.NodeID != e.nodeID {
		p = append(p, fmt.Sprintf("CSINode %s: nodeID %q, want %q", node, x.NodeID, e.nodeID))
	}
	if e.asked && !slices.Equal(x.TopologyKeys, e.topologyKeys) {
		p = append(p, fmt.Sprintf("CSINode %s: topologyKeys %q, want %q", node, x.TopologyKeys, e.topologyKeys))
	}
	if e.asked {
		switch {
		case e.maxVolumes > 0 && (x.Allocatable == nil || x.Allocatable.Count == nil):
			p = append(p, fmt.Sprintf("CSINode %s: no allocatable count, want %d", node, e.maxVolumes))
		case e.maxVolumes > 0 && int64(*x.Allocatable.Count) != e.maxVolumes:
			p = append(p, fmt.Sprintf("CSINode %s: allocatable count %d, want %d", node, *x.Allocatable.Count, e.maxVolumes))
		case e.maxVolumes == 0 && x.Allocatable != nil && x.Allocatable.Count != nil:
			p = append(p, fmt.Sprintf("CSINode %s: allocatable count %d, want none", node, *x.Allocatable.Count))
		}
	}
	return p
}

// problems lists every way the kubelet's registration on node differs from
// e: the annotation maps the driver to the node ID, one CSINode entry with
// that node ID, the topology keys and volume limit, the Node's topology
// labels. Nil means registered as expected.
func (d *driverUnderTest) problems(r Registration, node string, e nodeExpect) []string {
	var p []string
	switch {
	case !r.Annotated:
		p = append(p, fmt.Sprintf("node %s: annotation %s has no key %s", node, csiplugin.NodeIDAnnotation, d.name))
	case r.Annotation != e.nodeID:
		p = append(p, fmt.Sprintf("node %s: annotation %s maps %s to %q, want %q", node, csiplugin.NodeIDAnnotation, d.name, r.Annotation, e.nodeID))
	}
	p = append(p, d.entryProblems(r, node, e)...)
	if r.Annotated && len(r.Entries) > 0 && !r.Registered() {
		// The one rule every reader of the registration applies (csiplugin).
		p = append(p, fmt.Sprintf("node %s: %s: %s", node, d.name, r.Problem()))
	}
	for k, v := range e.topology {
		if got, ok := r.Labels[k]; !ok || got != v {
			p = append(p, fmt.Sprintf("node %s: label %s=%q (present %v), want %q", node, k, got, ok, v))
		}
	}
	if !e.asked {
		for _, k := range e.topologyKeys {
			if _, ok := r.Labels[k]; !ok {
				p = append(p, fmt.Sprintf("node %s: CSINode lists topology key %s, the Node has no such label", node, k))
			}
		}
	}
	return p
}

// Conditions on recorded states.
func (d *driverUnderTest) annotated(node string, e nodeExpect, want bool) func(record.State) bool {
	return AnnotatedWith(node, d.name, want, func(id string) bool { return id == e.nodeID })
}

func (d *driverUnderTest) entryPresent(node string, e nodeExpect) func(record.State) bool {
	return func(st record.State) bool {
		return d.entryProblems(Registration{Entries: CSINodeEntries(st.CSINode(node), d.name)}, node, e) == nil
	}
}

func (d *driverUnderTest) entryAbsent(node string) func(record.State) bool {
	return func(st record.State) bool {
		return st.CSINode(node) != nil && len(CSINodeEntries(st.CSINode(node), d.name)) == 0
	}
}

// diagnose names why the driver is not registered on node, most specific
// cause first: the manifests' own mistakes, the pod, the kubelet's attempts
// and errors (its log), the registration socket and what it announces,
// and the driver's answer at that endpoint.
func (s *suite) diagnose(ctx context.Context, node string) []string {
	d, cl := s.d, s.cl
	var c []string
	c = append(c, d.spec.Problems()...)
	pod, err := cl.PodOn(ctx, node)
	if err != nil {
		return append(c, err.Error())
	}
	if !PodReady(pod) {
		c = append(c, fmt.Sprintf("pod %s is not Ready: %s", pod.Name, waitingReasons(pod)))
	}
	if n, said, err := s.kubeletAttempts(ctx, node, d.applied); err != nil {
		c = append(c, fmt.Sprintf("the kubelet's log on %s: %v", node, err))
	} else if n > 0 {
		c = append(c, fmt.Sprintf("the kubelet tried to register the driver %d times since the apply and it is not registered; its log about it: %s", n, strings.Join(lastN(said, 5), " | ")))
	}
	files, err := cl.Node.PluginsRegistry(ctx, node)
	if err != nil {
		return append(c, err.Error())
	}
	found := ""
	for _, f := range files {
		if d.isRegSocket(f.Name) && f.Socket {
			found = f.Name
		}
	}
	if found == "" {
		c = append(c, fmt.Sprintf("no registration socket %s in %s on %s: the registrar did not create it (its log says why)", d.regSocketText(), PluginsRegistry, node))
	}
	if cl.Dialer == nil {
		sock := driverspec.ExpandForPod(d.spec.RegistrationPath, pod, d.spec.Registrar)
		out, err := cl.Node.NodeSh(ctx, node, `[ -S "$1" ] && echo socket || echo missing`, sock)
		if err == nil && strings.TrimSpace(out) == "missing" {
			c = append(c, fmt.Sprintf("no socket at --kubelet-registration-path=%s on %s: the kubelet calls NodeGetInfo there", sock, node))
		}
		return c
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	endpoint := d.spec.RegistrationPath
	if found != "" {
		info, err := RegistrationInfo(cctx, cl.Dialer, node, PluginsRegistry+"/"+found)
		switch {
		case err != nil:
			c = append(c, err.Error())
		case info.Name != d.name:
			c = append(c, fmt.Sprintf("%s announces driver %q, want %q (%s)", found, info.Name, d.name, d.nameFrom))
		case info.Endpoint != "":
			endpoint = info.Endpoint
		}
	}
	if _, err := AskDriver(cctx, cl.Dialer, node, endpoint); err != nil {
		c = append(c, fmt.Sprintf("the kubelet calls the driver at %s on %s (the endpoint the registrar announces: --kubelet-registration-path), and there: %v", endpoint, node, err))
	} else if _, err := s.expect(cctx, node); err != nil {
		c = append(c, err.Error())
	}
	return c
}

// csiDriverProblems checks the manifests' CSIDriver objects against the
// registered name: a CSIDriver that names another driver configures nothing.
func (s *suite) csiDriverProblems(ctx context.Context) []string {
	d, cl := s.d, s.cl
	if len(d.spec.CSIDrivers) == 0 {
		return nil
	}
	if !slices.Contains(d.spec.CSIDrivers, d.name) {
		return []string{fmt.Sprintf("the manifests' CSIDriver objects %q do not name the driver the kubelet registers (%s, %s): their settings apply to no driver", d.spec.CSIDrivers, d.name, d.nameFrom)}
	}
	if _, err := cl.Client.StorageV1().CSIDrivers().Get(ctx, d.name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return []string{fmt.Sprintf("CSIDriver %s is in the manifests but not in the cluster", d.name)}
		}
		return []string{err.Error()}
	}
	return nil
}
