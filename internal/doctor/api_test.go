package doctor_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// fakeAPIServer is a real HTTPS server (net/http/httptest) serving the three
// API paths doctor reads, with the objects a test sets. It is a fake of the
// Kubernetes API server: a real API server runs only in the e2e suite
// (kind/e2e). It accepts a bearer token or a client certificate signed by
// its client CA, like an API server with those authenticators.
type fakeAPIServer struct {
	*httptest.Server
	token    string
	clientCA *testCA

	mu         sync.Mutex
	node       string
	labels     map[string]string
	nodeIDs    map[string]string // the csi.volume.kubernetes.io/nodeid annotation; nil: absent
	csinode    []doctor.CSINodeDriver
	csidrivers []string
	// metrics is the kubelet's /metrics text served through the node proxy
	// (default: none of the plugin manager's series); metricsStatus, if not
	// 0, is the status served instead (e.g. 403: no `get nodes/proxy`).
	metrics       string
	metricsStatus int
	paths         []string // requested, in order
}

// registeredDriver serves a healthy driver name on n and an API server
// where node-1's kubelet registered it, with the driver's topology key: a
// driver as deployed.
func registeredDriver(t *testing.T, n *node, name string) *fakeAPIServer {
	t.Helper()
	n.healthyDriver(t, name)
	api := newFakeAPIServer(t, "node-1")
	api.registered(name, "node-1", "topology.example.com/zone")
	return api
}

func newFakeAPIServer(t *testing.T, node string) *fakeAPIServer {
	t.Helper()
	f := &fakeAPIServer{token: "good-token", clientCA: newTestCA(t), node: node}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: f.clientCA.pool}
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, r.URL.Path)
	authed := r.Header.Get("Authorization") == "Bearer "+f.token ||
		r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && r.TLS.PeerCertificates[0].Subject.CommonName == "system:node:"+f.node
	if !authed || r.Method != http.MethodGet {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"kind":"Status","message":"Unauthorized"}`)
		return
	}
	var obj any
	switch r.URL.Path {
	case "/api/v1/nodes/" + f.node + "/proxy/metrics":
		if f.metricsStatus != 0 {
			w.WriteHeader(f.metricsStatus)
			fmt.Fprintf(w, `{"kind":"Status","message":"nodes \"%s\" is forbidden: User \"system:node:%s\" cannot get resource \"nodes/proxy\""}`, f.node, f.node)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, f.metrics)
		return
	case "/api/v1/nodes/" + f.node:
		ann := map[string]string{"unrelated": "x"}
		if f.nodeIDs != nil {
			b, _ := json.Marshal(f.nodeIDs)
			ann[csiplugin.NodeIDAnnotation] = string(b)
		}
		obj = map[string]any{"kind": "Node", "metadata": map[string]any{"name": f.node, "labels": f.labels, "annotations": ann}}
	case "/apis/storage.k8s.io/v1/csinodes/" + f.node:
		obj = map[string]any{"kind": "CSINode", "metadata": map[string]any{"name": f.node}, "spec": map[string]any{"drivers": f.csinode}}
	case "/apis/storage.k8s.io/v1/csidrivers":
		var items []any
		for _, n := range f.csidrivers {
			items = append(items, map[string]any{"metadata": map[string]any{"name": n}})
		}
		obj = map[string]any{"kind": "CSIDriverList", "items": items}
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","message":"%s not found"}`, r.URL.Path)
		return
	}
	json.NewEncoder(w).Encode(obj)
}

// registered sets the API objects as the kubelet writes them once it
// registered driver with nodeID and topology keys, and the CSIDriver exists.
func (f *fakeAPIServer) registered(driver, nodeID string, keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodeIDs == nil {
		f.nodeIDs = map[string]string{}
	}
	f.nodeIDs[driver] = nodeID
	f.csinode = append(f.csinode, doctor.CSINodeDriver{Name: driver, NodeID: nodeID, TopologyKeys: keys})
	f.csidrivers = append(f.csidrivers, driver)
}

// kubeconfig writes a kubeconfig as kubectl writes it (sequences at their
// key's indentation, comments, quoted values) for the server, with user
// lines for the credentials, and returns its path.
func (f *fakeAPIServer) kubeconfig(t *testing.T, dir string, userLines ...string) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
	user := "    " + strings.Join(userLines, "\n    ")
	kc := fmt.Sprintf(`# written by the test, as kubectl would
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: "test-cluster"
contexts:
- context:
    cluster: test-cluster   # a comment after a value
    user: 'node-user'
  name: default
- context:
    cluster: other
    user: other
  name: other
current-context: default
kind: Config
preferences: {}
users:
- name: node-user
  user:
%s
`, base64.StdEncoding.EncodeToString(ca), f.URL, user)
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCA issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test client CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a PEM client certificate and key for cn.
func (ca *testCA) issue(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestAPIHealthy: a driver the kubelet registered, as the API server shows
// it, gives no finding, with token and with client-certificate credentials
// (the kubelet's kubeconfig names its certificate files by path).
func TestAPIHealthy(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	api := registeredDriver(t, n, "a.csi.example.com")

	cert, key := api.clientCA.issue(t, "system:node:node-1")
	pki := filepath.Join(n.dir, "pki")
	if err := os.Mkdir(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pki, "client.pem"), append(cert, key...), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, user := range map[string][]string{
		"token":            {"token: good-token"},
		"token file":       {"tokenFile: " + writeFile(t, n.dir, "token", "good-token\n")},
		"client cert data": {"client-certificate-data: " + base64.StdEncoding.EncodeToString(cert), "client-key-data: " + base64.StdEncoding.EncodeToString(key)},
		"client cert file": {"client-certificate: pki/client.pem", "client-key: " + filepath.Join(pki, "client.pem")},
	} {
		t.Run(name, func(t *testing.T) {
			o := n.opts()
			o.Kubeconfig = api.kubeconfig(t, t.TempDir(), user...)
			if name == "client cert file" {
				o.Kubeconfig = api.kubeconfig(t, n.dir, user...) // pki/ is relative to the kubeconfig
			}
			r := n.run(t, o)
			if len(r.Findings) != 0 {
				t.Fatalf("want no findings:\n%s", dump(r))
			}
			if r.API == nil || r.API.NodeIDs["a.csi.example.com"] != "node-1" || len(r.API.CSINode) != 1 || len(r.API.CSIDrivers) != 1 {
				t.Errorf("API state %+v", r.API)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAPIMismatches: what is missing on which side is named.
func TestAPIMismatches(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	n.healthyDriver(t, "a.csi.example.com") // live, but the kubelet did not register it
	n.healthyDriver(t, "b.csi.example.com") // registered, but no CSIDriver object
	drv := n.serveDriver(t, "c", &driver{name: "c.csi.example.com", nodeID: "node-1",
		topology: map[string]string{"topology.c/zone": "z2"}}) // collides with the Node's label
	n.register(t, "c.csi.example.com-reg.sock", "c.csi.example.com", drv)

	api := newFakeAPIServer(t, "node-1")
	api.registered("b.csi.example.com", "node-1", "topology.example.com/zone")
	api.registered("gone.csi.example.com", "node-1") // no socket announces it any more
	n.healthyDriver(t, "d.csi.example.com")
	api.registered("d.csi.example.com", "node-1")
	api.nodeIDs["d.csi.example.com"] = "node-0" // the annotation and the CSINode disagree
	api.csidrivers = []string{"a.csi.example.com", "gone.csi.example.com"}
	api.labels = map[string]string{"topology.c/zone": "z1"}
	o := n.opts()
	o.Kubeconfig = api.kubeconfig(t, t.TempDir(), "token: good-token")
	r := n.run(t, o)

	wantFinding(t, r, doctor.SeverityError, "a.csi.example.com", "not registered", csiplugin.NodeIDAnnotation)
	wantFinding(t, r, doctor.SeverityError, "a.csi.example.com", "not registered", "CSINode node-1 has no entry")
	wantFinding(t, r, doctor.SeverityWarning, "b.csi.example.com", "no CSIDriver object")
	wantFinding(t, r, doctor.SeverityWarning, "gone.csi.example.com", "no live socket")
	wantFinding(t, r, doctor.SeverityError, "d.csi.example.com", "not registered", `disagree: node ID "node-1" vs "node-0"`)
	wantFinding(t, r, doctor.SeverityError, "c.csi.example.com", "topology.c/zone=z2 collides with the Node's label topology.c/zone=z1")
	if got := find(r, doctor.SeverityWarning, "a.csi.example.com", "no CSIDriver"); len(got) != 0 {
		t.Errorf("a has a CSIDriver object: %+v", got)
	}
}

// TestKubeconfigYAMLForms: every YAML form kubectl reads works for the
// fields doctor uses: block scalars (literal and folded, chomped), flow
// style, anchors and aliases, a JSON document. The fake API server accepts
// only "good-token": a form read wrong is a 401 finding.
func TestKubeconfigYAMLForms(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	api := newFakeAPIServer(t, "node-1")
	api.registered("b.csi.example.com", "node-1")
	good := api.kubeconfig(t, t.TempDir(), "token: good-token")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string][]string{
		"literal block scalar": {"token: |-", "      good-token"},
		"folded block scalar":  {"token: >-", "      good-token"},
		"folded, clipped":      {"token: >", "      good-token", ""},
		"flow style user":      {"{token: 'good-token'}"},
	}
	for name, user := range forms {
		o := n.opts()
		o.Kubeconfig = api.kubeconfig(t, t.TempDir(), user...)
		if name == "flow style user" { // the user's mapping itself in flow style
			b, _ := os.ReadFile(o.Kubeconfig)
			b = []byte(strings.Replace(string(b), "  user:\n    {token", "  user: {token", 1))
			if err := os.WriteFile(o.Kubeconfig, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		wantAPIRead(t, name, n.run(t, o))
	}
	// Anchors: the token defined once, aliased in the user.
	anchored := strings.Replace(string(data), "kind: Config", "kind: Config\nx-token: &tok good-token", 1)
	anchored = strings.Replace(anchored, "token: good-token", "token: *tok", 1)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(anchored), 0o600); err != nil {
		t.Fatal(err)
	}
	o := n.opts()
	o.Kubeconfig = p
	wantAPIRead(t, "anchor", n.run(t, o))
}

// wantAPIRead checks doctor read the API server with the token: the CSINode
// entry of b (registered there, no socket here) is reported, and nothing
// says the server refused the credentials.
func wantAPIRead(t *testing.T, form string, r *doctor.Report) {
	t.Helper()
	if len(find(r, doctor.SeverityWarning, "b.csi.example.com", "no live socket")) == 0 {
		t.Errorf("%s: doctor did not read the CSINode: %+v", form, r.Findings)
	}
	for _, f := range r.Findings {
		if strings.Contains(f.Message, "401") {
			t.Errorf("%s: the token was read wrong: %+v", form, f)
		}
	}
}

// TestAPIErrors: a Node that does not exist and credentials the API server
// refuses are findings naming the cause; a kubeconfig that cannot be used
// is a validation error naming the rule.
func TestAPIErrors(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	api := newFakeAPIServer(t, "node-1")

	o := n.opts()
	o.NodeName = "node-2"
	o.Kubeconfig = api.kubeconfig(t, t.TempDir(), "token: good-token")
	wantFinding(t, n.run(t, o), doctor.SeverityError, "Node node-2", `no Node "node-2"`)

	o = n.opts()
	o.Kubeconfig = api.kubeconfig(t, t.TempDir(), "token: wrong")
	wantFinding(t, n.run(t, o), doctor.SeverityError, "Node node-1", "401 Unauthorized")

	for _, tc := range []struct {
		user []string
		rule string
	}{
		{[]string{"exec:", "  command: kubelogin"}, "kubectl csi-registrar status"},
		{[]string{"auth-provider: {name: oidc}"}, "auth-provider"},
		{[]string{"client-certificate-data: AAAA", "client-key-data: AAAA"}, "do not load"},
		{[]string{"token: [not, a, string]"}, "does not parse"},
	} {
		o.Kubeconfig = api.kubeconfig(t, t.TempDir(), tc.user...)
		_, err := doctor.Run(t.Context(), o)
		if !csiplugin.IsValidationError(err) || !strings.Contains(err.Error(), tc.rule) || !strings.Contains(err.Error(), o.Kubeconfig) {
			t.Errorf("%q: want a validation error naming %q and the file, got %v", tc.user, tc.rule, err)
		}
	}
}
