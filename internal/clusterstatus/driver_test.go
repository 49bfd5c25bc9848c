package clusterstatus

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const orphan = "orphan.csi.example.com"

// registeredStub is a cluster of two nodes where stub is registered on both
// by a DaemonSet, and the CSIDriver objects named exist.
func registeredStub(csiDrivers ...string) *Snapshot {
	ds := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub, "--http-endpoint=:9809"))
	linux := map[string]string{"kubernetes.io/os": "linux"}
	snap := &Snapshot{
		Nodes: []corev1.Node{node("node-1", linux, `{"stub.csi.example.com":"node-1"}`), node("node-2", linux, `{"stub.csi.example.com":"node-2"}`)},
		CSINodes: []storagev1.CSINode{csiNode("node-1", storagev1.CSINodeDriver{Name: stub, NodeID: "node-1"}),
			csiNode("node-2", storagev1.CSINodeDriver{Name: stub, NodeID: "node-2"})},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "node-1", true), podOf(ds, "node-2", true)},
		Missing:    map[string]bool{},
	}
	for _, name := range csiDrivers {
		snap.CSIDrivers = append(snap.CSIDrivers, storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	return snap
}

// printed is the report as the table (wide or not) prints it.
func printed(t *testing.T, r *Report, format string) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := (&Printer{Format: format, Out: &b}).Print(r, false); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCSIDriverWithoutNodePlugin: a CSIDriver object whose node plugin runs
// on no node is not registered (exit 1, with the reason), whether every
// driver or only it is asked for; it was "0 expected", exit 0.
func TestCSIDriverWithoutNodePlugin(t *testing.T) {
	snap := registeredStub(stub, orphan)
	for _, only := range []string{"", orphan} {
		r, _ := analyze(snap, only)
		d := driverOf(t, r, orphan)
		if d.Healthy() || r.ExitCode() != ExitUnhealthy || d.Expected != 0 ||
			!strings.Contains(d.Problem, "not registered on any node") || !strings.Contains(d.Problem, "no node plugin pod of it runs or is meant to run in any namespace") ||
			!strings.Contains(d.Problem, "CSIDriver object alone registers nothing") {
			t.Errorf("asking for %q: %s: %+v, exit %d; want not registered on any node, exit 1", only, orphan, d, r.ExitCode())
		}
		if len(d.Warnings) != 0 {
			t.Errorf("%s has a CSIDriver object: warnings %q", orphan, d.Warnings)
		}
		for _, format := range []string{OutputTable, OutputWide} {
			if out := printed(t, r, format); !strings.Contains(out, orphan) || !strings.Contains(out, "not registered on any node") {
				t.Errorf("-o %q does not say %s is not registered:\n%s", format, orphan, out)
			}
		}
	}
	if r, _ := analyze(snap, stub); r.ExitCode() != ExitHealthy {
		t.Errorf("%s alone: exit %d, want 0: %+v", stub, r.ExitCode(), r.Drivers)
	}

	// With -n, the reason names the namespace read.
	snap.Namespace = "storage"
	r, _ := analyze(snap, orphan)
	if p := driverOf(t, r, orphan).Problem; !strings.Contains(p, "in namespace storage (-n)") {
		t.Errorf("with -n storage: problem %q does not name the namespace", p)
	}
	snap.Namespace = ""

	// The pods could not be listed: not a failure seen, the answer is
	// incomplete (exit 3).
	snap.Missing["pods"] = true
	snap.Unknown = []Unknown{{What: "pods (all namespaces)", Error: "forbidden"}}
	r, _ = analyze(snap, orphan)
	if d := driverOf(t, r, orphan); d.Problem != "" || r.ExitCode() != ExitIncomplete {
		t.Errorf("pods not listed: %+v, exit %d; want no problem, exit 3", d, r.ExitCode())
	}
}

// TestNodePluginMeantForNoNode: a DaemonSet whose node selection excludes
// every node leaves its driver registered nowhere: not registered, the
// DaemonSet named.
func TestNodePluginMeantForNoNode(t *testing.T) {
	snap := registeredStub(stub)
	ds := daemonSet("gpu", "gpu-node", pluginSpec("csi-registrar:dev", "gpu.csi.example.com"))
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	snap.DaemonSets = append(snap.DaemonSets, ds)
	snap.CSIDrivers = append(snap.CSIDrivers, storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "gpu.csi.example.com"}})
	r, _ := analyze(snap, "")
	d := driverOf(t, r, "gpu.csi.example.com")
	if d.Healthy() || !strings.Contains(d.Problem, "DaemonSet gpu/gpu-node") || !strings.Contains(d.Problem, "exclude every node") {
		t.Errorf("%+v: want not registered on any node, naming DaemonSet gpu/gpu-node", d)
	}
	if r.ExitCode() != ExitUnhealthy {
		t.Errorf("exit %d, want 1", r.ExitCode())
	}
}

// TestNoCSIDriverObject: a driver registered everywhere without a CSIDriver
// object is healthy, with a warning saying so; no warning when the
// CSIDrivers could not be listed.
func TestNoCSIDriverObject(t *testing.T) {
	snap := registeredStub()
	r, _ := analyze(snap, "")
	d := driverOf(t, r, stub)
	if !d.Healthy() || r.ExitCode() != ExitHealthy || d.Registered != 2 {
		t.Errorf("%+v, exit %d: want registered on both nodes, exit 0", d, r.ExitCode())
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "no CSIDriver object") {
		t.Errorf("warnings %q: want one saying there is no CSIDriver object", d.Warnings)
	}
	for _, format := range []string{OutputTable, OutputWide} {
		if out := printed(t, r, format); !strings.Contains(out, "warning: no CSIDriver object") {
			t.Errorf("-o %q does not warn of the missing CSIDriver object:\n%s", format, out)
		}
	}
	snap.Missing["csidrivers"] = true
	if r, _ := analyze(snap, ""); len(driverOf(t, r, stub).Warnings) != 0 {
		t.Errorf("CSIDrivers not listed: warnings %q, want none", driverOf(t, r, stub).Warnings)
	}
}
