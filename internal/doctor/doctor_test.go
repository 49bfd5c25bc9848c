package doctor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// TestHealthy: a driver with its registration socket, as deployed, gives no
// finding; the entry and the driver's answers are in the report.
func TestHealthy(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	reg, drvSock := n.healthyDriver(t, "a.csi.example.com")
	if err := os.Mkdir(filepath.Join(n.registry, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	o := n.opts()
	o.NodeLabels = map[string]string{"topology.example.com/zone": "a", "other": "x"}
	r := n.run(t, o)
	if len(r.Findings) != 0 || !r.Healthy() {
		t.Fatalf("want no findings:\n%s", dump(r))
	}
	e := entry(t, r, reg)
	if e.Kind != doctor.KindSocket || e.GetInfo != doctor.GetInfoAnswered || e.Plugin == nil || e.Plugin.Name != "a.csi.example.com" ||
		e.Plugin.Endpoint != drvSock {
		t.Errorf("entry %+v", e)
	}
	if d := e.Driver; d == nil || d.Name != "a.csi.example.com" || d.NodeID != "node-1" || d.Ready == nil || !*d.Ready ||
		d.Topology["topology.example.com/zone"] != "a" {
		t.Errorf("driver %+v", e.Driver)
	}
	if sub := entry(t, r, filepath.Join(n.registry, "sub")); sub.Kind != doctor.KindDirectory {
		t.Errorf("sub: %+v", sub)
	}

	var text, js bytes.Buffer
	if err := doctor.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "healthy: 1 socket(s), 1 CSI plugin(s), no findings") || strings.Contains(text.String(), "SEVERITY") {
		t.Errorf("text output:\n%s", text.String())
	}
	if err := doctor.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back doctor.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Entries) != 2 || back.Entries[0].Plugin == nil || back.Findings == nil {
		t.Errorf("JSON round trip: %v\n%s", err, js.String())
	}
}

// TestFaults plants each fault in a registry of its own, next to a healthy
// driver, and checks that it is found, named, and given a fix, and that the
// healthy driver stays clean.
func TestFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, n *node, o *doctor.Options) (sev doctor.Severity, subject string, subs []string)
	}{
		{"stale socket", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := filepath.Join(n.registry, "gone.csi.example.com-reg.sock")
			registrartest.StaleSocket(t, p)
			return doctor.SeverityError, p, []string{"stale socket", "connection refused"}
		}},
		{"hung server", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := filepath.Join(n.registry, "hung-reg.sock")
			hungSocket(t, p)
			return doctor.SeverityError, p, []string{"hung", "did not answer GetInfo within the kubelet's 1s deadline"}
		}},
		{"foreign file", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := filepath.Join(n.registry, "notes.txt")
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			return doctor.SeverityWarning, p, []string{"a file, not a socket", "ignores it"}
		}},
		{"dangling symlink", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := filepath.Join(n.registry, "link-reg.sock")
			if err := os.Symlink("/nonexistent/reg.sock", p); err != nil {
				t.Fatal(err)
			}
			return doctor.SeverityWarning, p, []string{"symbolic link", "/nonexistent/reg.sock"}
		}},
		{"not a registration server", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			// A driver's own CSI socket put in the registry by mistake.
			p := filepath.Join(n.registry, "csi.sock")
			serve(t, p, func(s *grpc.Server) { csi.RegisterIdentityServer(s, &driver{name: "x"}) })
			return doctor.SeverityError, p, []string{"not a registration server", "does not implement pluginregistration.v1 GetInfo"}
		}},
		{"not gRPC at all", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := filepath.Join(n.registry, "http-reg.sock")
			serveHTTP1(t, p)
			return doctor.SeverityError, p, []string{"not a registration server", "does not speak gRPC"}
		}},
		{"duplicate names", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			drv := n.serveDriver(t, "dup", &driver{name: "dup.csi.example.com", nodeID: "node-1"})
			first := n.register(t, "dup.csi.example.com-reg.sock", "dup.csi.example.com", drv)
			second := n.register(t, "dup-copy-reg.sock", "dup.csi.example.com", drv)
			return doctor.SeverityError, "dup.csi.example.com", []string{"duplicate", "2 live sockets", first, second}
		}},
		{"endpoint missing", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			missing := filepath.Join(n.dir, "plugins", "nothing", "csi.sock")
			n.register(t, "m.csi.example.com-reg.sock", "m.csi.example.com", missing)
			return doctor.SeverityError, "m.csi.example.com", []string{"endpoint " + missing, "does not exist"}
		}},
		{"endpoint stale", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := filepath.Join(n.dir, "s.sock")
			registrartest.StaleSocket(t, p)
			n.register(t, "s.csi.example.com-reg.sock", "s.csi.example.com", p)
			return doctor.SeverityError, "s.csi.example.com", []string{"driver's socket " + p + " is stale"}
		}},
		{"endpoint relative", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			n.register(t, "r.csi.example.com-reg.sock", "r.csi.example.com", "plugins/r/csi.sock")
			return doctor.SeverityError, "r.csi.example.com", []string{`endpoint "plugins/r/csi.sock"`, "cannot be dialed", "absolute"}
		}},
		{"empty node ID", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			drv := n.serveDriver(t, "e", &driver{name: "e.csi.example.com"})
			n.register(t, "e.csi.example.com-reg.sock", "e.csi.example.com", drv)
			return doctor.SeverityError, "e.csi.example.com", []string{"empty node ID", "rejects"}
		}},
		{"node ID is not the node name", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			drv := n.serveDriver(t, "p", &driver{name: "p.csi.example.com", nodeID: "p-pod-7d9f"})
			n.register(t, "p.csi.example.com-reg.sock", "p.csi.example.com", drv)
			return doctor.SeverityInfo, "p.csi.example.com", []string{`node ID "p-pod-7d9f" is not the node name "node-1"`}
		}},
		{"name mismatch", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			drv := n.serveDriver(t, "new", &driver{name: "new.csi.example.com", nodeID: "node-1"})
			n.register(t, "old.csi.example.com-reg.sock", "old.csi.example.com", drv)
			return doctor.SeverityError, "old.csi.example.com", []string{"name mismatch", `"old.csi.example.com"`, `calls itself "new.csi.example.com"`}
		}},
		{"driver not ready", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			drv := n.serveDriver(t, "nr", &driver{name: "nr.csi.example.com", nodeID: "node-1", notReady: true})
			n.register(t, "nr.csi.example.com-reg.sock", "nr.csi.example.com", drv)
			return doctor.SeverityWarning, "nr.csi.example.com", []string{"not ready"}
		}},
		{"topology collision", func(t *testing.T, n *node, o *doctor.Options) (doctor.Severity, string, []string) {
			drv := n.serveDriver(t, "t", &driver{name: "t.csi.example.com", nodeID: "node-1", topology: map[string]string{"topology.t/zone": "b"}})
			n.register(t, "t.csi.example.com-reg.sock", "t.csi.example.com", drv)
			o.NodeLabels = map[string]string{"topology.t/zone": "a"}
			return doctor.SeverityError, "t.csi.example.com", []string{"topology.t/zone=b collides with the Node's label topology.t/zone=a"}
		}},
		{"invalid driver name", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			p := n.register(t, "bad-reg.sock", "bad_name", "")
			return doctor.SeverityError, p, []string{"driver name", `"bad_name"`}
		}},
		{"long path", func(t *testing.T, n *node, _ *doctor.Options) (doctor.Severity, string, []string) {
			// bind(2) refuses such a path: make the socket at a short one and
			// move it into a deep directory, where the kubelet cannot dial it.
			short := filepath.Join(n.dir, "l.sock")
			registrartest.StaleSocket(t, short)
			deep := filepath.Join(n.registry, strings.Repeat("d", 60), strings.Repeat("e", 40))
			if err := os.MkdirAll(deep, 0o750); err != nil {
				t.Fatal(err)
			}
			long := filepath.Join(deep, "long.csi.example.com-reg.sock")
			if err := os.Rename(short, long); err != nil {
				t.Fatal(err)
			}
			return doctor.SeverityError, long, []string{"bytes long", "at most 107", "cannot dial it"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			n.healthyDriver(t, "ok.csi.example.com")
			o := n.opts()
			sev, subject, subs := tc.plant(t, n, &o)
			r := n.run(t, o)
			wantFinding(t, r, sev, subject, subs...)
			if all := append(find(r, doctor.SeverityError, subject), find(r, doctor.SeverityWarning, subject)...); len(all) > 1 {
				t.Errorf("want the fault named once, with no follow-up noise:\n%s", dump(r))
			}
			if got := find(r, doctor.SeverityError, "ok.csi.example.com"); len(got) != 0 {
				t.Errorf("the healthy driver got findings: %+v", got)
			}
			if r.Healthy() != (sev == doctor.SeverityInfo) {
				t.Errorf("Healthy() = %v with a %s finding", r.Healthy(), sev)
			}
			var text bytes.Buffer
			if err := doctor.WriteText(&text, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), filepath.Base(subject)) || (sev != doctor.SeverityInfo && !strings.Contains(text.String(), "NOT healthy")) {
				t.Errorf("text output lacks the finding:\n%s", text.String())
			}
		})
	}
}

// TestIgnoredEntries: what the kubelet's plugin watcher skips (names
// starting with ".", and everything below such a directory) is listed as
// ignored and raises no finding, even when it is a stale socket.
func TestIgnoredEntries(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	registrartest.StaleSocket(t, filepath.Join(n.registry, ".hidden-reg.sock"))
	if err := os.Mkdir(filepath.Join(n.registry, ".d"), 0o750); err != nil {
		t.Fatal(err)
	}
	registrartest.StaleSocket(t, filepath.Join(n.registry, ".d", "x-reg.sock"))
	r := n.run(t, n.opts())
	if len(r.Findings) != 0 {
		t.Fatalf("want no findings:\n%s", dump(r))
	}
	if e := entry(t, r, filepath.Join(n.registry, ".hidden-reg.sock")); e.Ignored == "" || e.GetInfo != "" {
		t.Errorf("hidden socket: %+v", e)
	}
	for _, e := range r.Entries {
		if strings.HasSuffix(e.Path, "x-reg.sock") {
			t.Errorf("entered an ignored directory: %+v", e)
		}
	}
}

// TestUnreachableMode: a socket whose permission bits give uid 0 no write
// permission is flagged (a kubelet without CAP_DAC_OVERRIDE is refused);
// the same socket with owner write is not.
func TestUnreachableMode(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	n := newNode(t)
	reg, _ := n.healthyDriver(t, "u.csi.example.com")
	if err := os.Chown(reg, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(reg, 0o600); err != nil {
		t.Fatal(err)
	}
	r := n.run(t, n.opts())
	wantFinding(t, r, doctor.SeverityWarning, reg, "may be unreachable", "owned by 1000:1000", "CAP_DAC_OVERRIDE")
	if len(r.Findings) != 1 {
		t.Errorf("want only that finding:\n%s", dump(r))
	}
	if err := os.Chmod(reg, 0o602); err != nil {
		t.Fatal(err)
	}
	if r := n.run(t, n.opts()); len(r.Findings) != 0 {
		t.Errorf("mode 0602 lets uid 0 write; findings:\n%s", dump(r))
	}
}

// TestRegistryMissing: a registry that does not exist is one error finding
// that names the kubelet's root directory as the likely cause.
func TestRegistryMissing(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	o := n.opts()
	o.PluginsRegistry = filepath.Join(n.dir, "nope")
	r := n.run(t, o)
	wantFinding(t, r, doctor.SeverityError, o.PluginsRegistry, "does not exist")
}

// TestHostRoot: with HostRoot, host paths (the registry and the endpoints
// the plugins announce) are read under it, and reported as host paths.
func TestHostRoot(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	drv := n.serveDriver(t, "h", &driver{name: "h.csi.example.com", nodeID: "node-1"})
	hostDrv := strings.TrimPrefix(drv, n.dir)
	reg := n.register(t, "h.csi.example.com-reg.sock", "h.csi.example.com", hostDrv)
	o := doctor.Options{HostRoot: n.dir, PluginsRegistry: "/reg", NodeName: "node-1"}
	r := n.run(t, o)
	if len(r.Findings) != 0 {
		t.Fatalf("want no findings:\n%s", dump(r))
	}
	e := entry(t, r, "/reg/"+filepath.Base(reg))
	if e.Driver == nil || e.Driver.Endpoint != hostDrv || e.Driver.NodeID != "node-1" {
		t.Errorf("entry %+v, driver %+v", e, e.Driver)
	}
	// Without it, the announced host path does not exist here.
	o.HostRoot, o.PluginsRegistry = "", n.registry
	r = n.run(t, o)
	wantFinding(t, r, doctor.SeverityError, "h.csi.example.com", "endpoint "+hostDrv, "does not exist")
}

// TestBadOptions: options that break a rule are a *csiplugin.ValidationError
// naming the value.
func TestBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []doctor.Options{
		{PluginsRegistry: "relative/dir"},
		{HostRoot: "host"},
		{Timeout: -1},
		{Kubeconfig: "/nonexistent/kubeconfig", NodeName: "n"},
	} {
		_, err := doctor.Run(context.Background(), o)
		if !csiplugin.IsValidationError(err) {
			t.Errorf("%+v: want a validation error, got %v", o, err)
		}
	}
	if _, err := doctor.ParseLabels("a=b,novalue"); !csiplugin.IsValidationError(err) || !strings.Contains(err.Error(), "novalue") {
		t.Errorf("ParseLabels: %v", err)
	}
	if l, err := doctor.ParseLabels("a=b, c=d="); err != nil || l["a"] != "b" || l["c"] != "d=" {
		t.Errorf("ParseLabels: %v %v", l, err)
	}
}

// TestPathTooLongHere: under HostRoot, a host path that fits a socket
// address may not fit once prefixed: such a socket is reported as not
// checked (a warning), not as broken.
func TestPathTooLongHere(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	// A host root long enough that <root>/reg/<name> exceeds 107 bytes.
	root := filepath.Join(n.dir, strings.Repeat("h", 80))
	if err := os.MkdirAll(filepath.Join(root, "reg"), 0o750); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(n.dir, "x.sock")
	registrartest.StaleSocket(t, short)
	hostPath := "/reg/" + strings.Repeat("x", 20) + "-reg.sock"
	if err := os.Rename(short, filepath.Join(root, hostPath)); err != nil {
		t.Fatal(err)
	}
	r := n.run(t, doctor.Options{HostRoot: root, PluginsRegistry: "/reg", NodeName: "node-1"})
	wantFinding(t, r, doctor.SeverityWarning, hostPath, "not checked", "--host-root")
	if len(r.Findings) != 1 {
		t.Errorf("want only that finding:\n%s", dump(r))
	}
}
