package doctor

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// APIState is what the API server holds about the node's CSI drivers.
type APIState struct {
	// NodeIDs is the Node annotation csi.volume.kubernetes.io/nodeid.
	NodeIDs map[string]string `json:"nodeIDs"`
	// CSINode are the drivers of the node's CSINode; nil if it does not exist.
	CSINode []CSINodeDriver `json:"csiNode"`
	// CSIDrivers are the names of the cluster's CSIDriver objects.
	CSIDrivers []string `json:"csiDrivers"`
}

// CSINodeDriver is one entry of CSINode spec.drivers.
type CSINodeDriver struct {
	Name         string   `json:"name"`
	NodeID       string   `json:"nodeID"`
	TopologyKeys []string `json:"topologyKeys,omitempty"`
}

// apiNode is the part of a Node doctor reads.
type apiNode struct {
	Labels      map[string]string
	Annotations map[string]string
}

// errNotFound is a 404 from the API server.
var errNotFound = errors.New("not found")

// get GETs an API path and decodes the JSON answer into out. It speaks
// HTTP/1.1 over one TLS connection per request (three per run): net/http's
// client Transport, with its bundled HTTP/2 client, would add ~0.5 MB to
// the binary for nothing doctor needs.
func (c *apiClient) get(ctx context.Context, path string, out any) error {
	body, err := c.getRaw(ctx, path, "application/json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// getRaw GETs an API path and returns the answer's body; an answer other
// than 200 is an error (errNotFound for a 404, else with the status's
// message or the start of the text).
func (c *apiClient) getRaw(ctx context.Context, path, accept string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.server+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "csi-registrar-doctor")
	req.Close = true
	switch {
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	case c.user != "":
		req.SetBasicAuth(c.user, c.pass)
	}
	status, body, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	switch {
	case status == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %w", path, errNotFound)
	case status != http.StatusOK:
		var st struct{ Message string }
		if json.Unmarshal(body, &st) != nil || st.Message == "" {
			st.Message = strings.TrimSpace(string(body[:min(len(body), 300)]))
		}
		return nil, &httpError{path: path, status: status, message: st.Message}
	}
	return body, nil
}

// httpError is an answer other than 200 or 404.
type httpError struct {
	path    string
	status  int
	message string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("GET %s: %d %s: %s", e.path, e.status, http.StatusText(e.status), e.message)
}

// roundTrip sends req on a new TLS connection and reads the whole answer.
func (c *apiClient) roundTrip(ctx context.Context, req *http.Request) (int, []byte, error) {
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "443")
	}
	d := &tls.Dialer{Config: c.tls}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if err := req.Write(conn); err != nil {
		return 0, nil, err
	}
	rsp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return 0, nil, err
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(rsp.Body, 32<<20))
	return rsp.StatusCode, body, err
}

// fetchAPI reads the Node, its CSINode and the CSIDriver objects. What
// cannot be read becomes a finding; the state holds what could be.
func (d *diagnosis) fetchAPI(ctx context.Context, c *apiClient) {
	node := d.opts.NodeName
	subject := "Node " + node
	st := &APIState{}
	d.report.API = st
	authFix := "check that the kubeconfig's user may get nodes, csinodes and list csidrivers (the kubelet's own kubeconfig may)"

	var n struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	err := c.get(ctx, "/api/v1/nodes/"+url.PathEscape(node), &n)
	switch {
	case errors.Is(err, errNotFound):
		d.addf(SeverityError, subject, "pass the node's name as the kubelet registered it (kubectl get nodes) with --node-name",
			"the API server has no Node %q", node)
		return
	case err != nil:
		d.addf(SeverityError, subject, authFix, "cannot read the Node: %v", err)
		return
	}
	d.node = &apiNode{Labels: n.Metadata.Labels, Annotations: n.Metadata.Annotations}
	ids, err := csiplugin.ParseNodeIDAnnotation(n.Metadata.Annotations[csiplugin.NodeIDAnnotation])
	if err != nil {
		d.addf(SeverityError, subject, "the kubelet rewrites it on the next registration; remove the annotation if it stays broken", "%v", err)
		ids = map[string]string{}
	}
	st.NodeIDs = ids

	var cn struct {
		Spec struct {
			Drivers []CSINodeDriver `json:"drivers"`
		} `json:"spec"`
	}
	err = c.get(ctx, "/apis/storage.k8s.io/v1/csinodes/"+url.PathEscape(node), &cn)
	switch {
	case errors.Is(err, errNotFound):
		d.addf(SeverityError, "CSINode "+node, "check the kubelet's log: it creates the CSINode at start and keeps the Node not Ready until it exists",
			"the API server has no CSINode %q", node)
	case err != nil:
		d.addf(SeverityError, "CSINode "+node, authFix, "cannot read the CSINode: %v", err)
	default:
		st.CSINode = cn.Spec.Drivers
		if st.CSINode == nil {
			st.CSINode = []CSINodeDriver{}
		}
	}

	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := c.get(ctx, "/apis/storage.k8s.io/v1/csidrivers", &list); err != nil {
		d.addf(SeverityWarning, "CSIDrivers", authFix, "cannot list the CSIDriver objects: %v", err)
		st.CSIDrivers = nil
	} else {
		st.CSIDrivers = []string{}
		for _, it := range list.Items {
			st.CSIDrivers = append(st.CSIDrivers, it.Metadata.Name)
		}
		sort.Strings(st.CSIDrivers)
	}
}

// compareAPI names what is missing on which side: drivers the node serves
// that the kubelet did not write to the Node and CSINode, entries the API
// server keeps for drivers no socket announces, and drivers without a
// CSIDriver object.
func (d *diagnosis) compareAPI() {
	st := d.report.API
	if st == nil || d.node == nil {
		return
	}
	node := d.opts.NodeName
	live := map[string]*Entry{}
	for i := range d.report.Entries {
		e := &d.report.Entries[i]
		if e.Plugin != nil && e.Plugin.Type == "CSIPlugin" {
			live[e.Plugin.Name] = e
		}
	}
	csinode := map[string]CSINodeDriver{}
	for _, c := range st.CSINode {
		csinode[c.Name] = c
	}
	kubeletLog := "the kubelet rejected it or never tried: look for the driver's name in the kubelet's log (journalctl -u kubelet); the kubelet never retries by itself: re-create the registration socket (restart the registrar) once the cause is fixed"
	names := slices.Sorted(maps.Keys(live))
	for _, name := range names {
		drv := live[name].Driver
		id, inAnnotation := st.NodeIDs[name]
		c, inCSINode := csinode[name]
		reg := csiplugin.Registration{InCSINode: inCSINode, CSINodeID: c.NodeID, Annotated: inAnnotation, AnnotationID: id}
		if !inAnnotation {
			d.addf(SeverityError, name, kubeletLog,
				"not registered: a live socket announces it, but the Node's %s annotation has no entry for it", csiplugin.NodeIDAnnotation)
		}
		if st.CSINode != nil && !inCSINode {
			d.addf(SeverityError, name, kubeletLog, "not registered: CSINode %s has no entry for it", node)
		}
		switch {
		case inAnnotation && inCSINode && !reg.Registered():
			d.addf(SeverityError, name, "re-register (restart the registrar) so that the kubelet writes both again",
				"not registered: %s", reg.Problem())
		case inAnnotation && drv != nil && drv.NodeID != "" && id != drv.NodeID:
			d.addf(SeverityWarning, name, "re-register (restart the registrar) so that the kubelet writes the current node ID",
				"the Node annotation maps it to node ID %q, the driver now reports %q", id, drv.NodeID)
		case inCSINode && drv != nil && drv.NodeID != "" && !sameKeys(c.TopologyKeys, drv.Topology):
			d.addf(SeverityWarning, name, "re-register (restart the registrar) so that the kubelet writes the current topology keys",
				"CSINode %s lists topology keys %q, the driver now reports %q", node, c.TopologyKeys, keysOf(drv.Topology))
		}
		if st.CSIDrivers != nil && !slices.Contains(st.CSIDrivers, name) {
			d.addf(SeverityWarning, name, "apply the driver's CSIDriver object (kubectl get csidriver "+name+" returns NotFound)",
				"no CSIDriver object: the cluster uses defaults (attachRequired: true, no podInfoOnMount) and refuses inline ephemeral volumes of this driver")
		}
	}
	gone := map[string]bool{}
	for name := range st.NodeIDs {
		if live[name] == nil {
			gone[name] = true
		}
	}
	for name := range csinode {
		if live[name] == nil {
			gone[name] = true
		}
	}
	for name := range gone {
		d.addf(SeverityWarning, name, "if the driver is still wanted, its registrar is not serving (check its pod); if it was uninstalled, the kubelet drops the entry when its socket goes (a kubelet restart clears a leftover)",
			"the API server lists it for node %s (annotation or CSINode), but no live socket in %s announces it", node, d.opts.PluginsRegistry)
	}
}

func keysOf(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func sameKeys(list []string, m map[string]string) bool {
	a := slices.Clone(list)
	sort.Strings(a)
	return slices.Equal(a, keysOf(m))
}
