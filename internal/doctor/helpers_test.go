package doctor_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
)

// node is a test node: a short temporary directory holding the kubelet's
// plugins_registry and the drivers' sockets. Every socket in it is a real
// unix socket; every server a real gRPC server.
type node struct {
	dir      string
	registry string
}

// shortDir makes a temporary directory with a short path (unix socket paths
// hold at most 107 bytes; t.TempDir() paths can be longer).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{dir: shortDir(t)}
	n.registry = filepath.Join(n.dir, "reg")
	if err := os.Mkdir(n.registry, 0o750); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) opts() doctor.Options {
	return doctor.Options{PluginsRegistry: n.registry, NodeName: "node-1"}
}

func (n *node) run(t *testing.T, o doctor.Options) *doctor.Report {
	t.Helper()
	r, err := doctor.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

// serve serves a gRPC server on a new unix socket at path until the test ends.
func serve(t *testing.T, path string, register func(*grpc.Server)) {
	t.Helper()
	s := grpc.NewServer()
	register(s)
	serveOn(t, path, s.Serve, s.Stop)
}

// serveOn listens on a new unix socket at path and runs serveLn on it in a
// goroutine until the test ends: then stop ends it and the test waits for
// the goroutine.
func serveOn(t *testing.T, path string, serveLn func(net.Listener) error, stop func()) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveLn(ln)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
}

// registration is a pluginregistration.v1 server answering GetInfo with info.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

// register serves a registration socket <registry>/<file> announcing a CSI
// plugin name with endpoint.
func (n *node) register(t *testing.T, file, name, endpoint string) string {
	t.Helper()
	p := filepath.Join(n.registry, file)
	serve(t, p, func(s *grpc.Server) {
		registerapi.RegisterRegistrationServer(s, &registration{info: &registerapi.PluginInfo{
			Type: registerapi.CSIPlugin, Name: name, Endpoint: endpoint, SupportedVersions: []string{"1.0.0"}}})
	})
	return p
}

// driver is a CSI Identity and Node server with the answers a test sets.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	name     string
	nodeID   string
	topology map[string]string
	notReady bool
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "test"}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(!d.notReady)}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	rsp := &csi.NodeGetInfoResponse{NodeId: d.nodeID}
	if d.topology != nil {
		rsp.AccessibleTopology = &csi.Topology{Segments: d.topology}
	}
	return rsp, nil
}

// serveDriver serves d on <node>/plugins/<dir>/csi.sock and returns the path.
func (n *node) serveDriver(t *testing.T, dir string, d *driver) string {
	t.Helper()
	p := filepath.Join(n.dir, "plugins", dir, "csi.sock")
	serve(t, p, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, d)
		csi.RegisterNodeServer(s, d)
	})
	return p
}

// healthyDriver serves a driver and its registration socket, as a correctly
// deployed driver and registrar would leave them.
func (n *node) healthyDriver(t *testing.T, name string) (regSock, driverSock string) {
	t.Helper()
	driverSock = n.serveDriver(t, name, &driver{name: name, nodeID: "node-1", topology: map[string]string{"topology.example.com/zone": "a"}})
	return n.register(t, name+"-reg.sock", name, driverSock), driverSock
}

// hungSocket serves a listener that accepts connections and never answers
// (no HTTP/2 handshake), like a process stuck before serving gRPC.
func hungSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
}

// find returns the findings of severity sev about subject whose message
// contains every one of subs.
func find(r *doctor.Report, sev doctor.Severity, subject string, subs ...string) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range r.Findings {
		if f.Severity != sev || f.Subject != subject {
			continue
		}
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(f.Message, s)
		}
		if ok {
			out = append(out, f)
		}
	}
	return out
}

// wantFinding fails the test unless r has exactly one such finding, with a fix.
func wantFinding(t *testing.T, r *doctor.Report, sev doctor.Severity, subject string, subs ...string) doctor.Finding {
	t.Helper()
	got := find(r, sev, subject, subs...)
	if len(got) != 1 {
		t.Fatalf("want one %s finding about %s containing %q; findings:\n%s", sev, subject, subs, dump(r))
	}
	if got[0].Fix == "" {
		t.Errorf("finding %+v has no fix", got[0])
	}
	return got[0]
}

func dump(r *doctor.Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString("  " + string(f.Severity) + " | " + f.Subject + " | " + f.Message + " | " + f.Fix + "\n")
	}
	if b.Len() == 0 {
		return "  (none)\n"
	}
	return b.String()
}

func entry(t *testing.T, r *doctor.Report, path string) doctor.Entry {
	t.Helper()
	for _, e := range r.Entries {
		if e.Path == path {
			return e
		}
	}
	t.Fatalf("no entry %s in %+v", path, r.Entries)
	return doctor.Entry{}
}

// serveHTTP1 serves plain HTTP/1.1 on a unix socket: it accepts
// connections and answers, but not gRPC.
func serveHTTP1(t *testing.T, path string) {
	t.Helper()
	s := &http.Server{Handler: http.NotFoundHandler()}
	serveOn(t, path, s.Serve, func() { s.Close() })
}
