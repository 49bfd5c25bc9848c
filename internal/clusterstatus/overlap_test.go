package clusterstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakeclient "k8s.io/client-go/kubernetes/fake"
)

// The overlap of two node plugin pods of one driver on one node, read from
// client-go's fake clientset (no API server runs in unit tests): the
// objects are shaped as the API server returns them during a DaemonSet
// rollout with maxSurge (manifests/: the rolling-update mode) and with two
// DaemonSets for one driver.

var t0 = time.Date(2026, 11, 25, 16, 0, 0, 0, time.UTC)

// revPod is a ready pod of ds on nodeName, of the given revision
// (controller-revision-hash), created at created.
func revPod(ds appsv1.DaemonSet, nodeName, name, rev string, created time.Time) corev1.Pod {
	p := podOf(ds, nodeName, true)
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.Labels = map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: rev}
	p.CreationTimestamp = metav1.NewTime(created)
	return p
}

func terminating(p corev1.Pod) corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Minute)}
	return p
}

// rollingDaemonSet is the node plugin's DaemonSet with its status.
func rollingDaemonSet(name string, desired, updated int32) appsv1.DaemonSet {
	ds := daemonSet("csi-registrar", name, pluginSpec("csi-registrar:dev", stub, "--rolling-update=$(POD_UID)"))
	ds.Spec.Template.Spec.NodeSelector = nil
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, CurrentNumberScheduled: desired, UpdatedNumberScheduled: updated,
		NumberReady: desired, NumberAvailable: desired}
	return ds
}

// statusOf answers from a fake clientset holding two registered nodes and objs.
func statusOf(t *testing.T, objs ...runtime.Object) *Report {
	t.Helper()
	base := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{"csi.volume.kubernetes.io/nodeid": `{"stub.csi.example.com":"node-1"}`}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Annotations: map[string]string{"csi.volume.kubernetes.io/nodeid": `{"stub.csi.example.com":"node-2"}`}}},
		&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: stub, NodeID: "node-1"}}}},
		&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: stub, NodeID: "node-2"}}}},
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: stub}},
	}
	fake := fakeclient.NewClientset(append(base, objs...)...)
	r, err := Status(context.Background(), fake, Options{ProxyTimeout: DefaultProxyTimeout, ProxyConcurrency: 1, NoProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ptrs[T any](objs ...T) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i := range objs {
		out[i] = any(&objs[i]).(runtime.Object)
	}
	return out
}

func wideText(t *testing.T, r *Report, format string) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := (&Printer{Format: format, Out: &out}).Print(r, false); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// checkTableWide fails t unless r printed as a table contains table and
// printed -o wide contains wide, node-1's line, which it logs.
func checkTableWide(t *testing.T, r *Report, table, wide string) {
	t.Helper()
	gotTable, gotWide := wideText(t, r, OutputTable), wideText(t, r, OutputWide)
	if !strings.Contains(gotTable, table) || !strings.Contains(gotWide, wide) {
		t.Errorf("table:\n%s\nwide:\n%s", gotTable, gotWide)
	}
	t.Logf("-o wide, node-1: %s", wide)
}

// TestRolloutOverlap: two pods of the node plugin's DaemonSet on node-1, of
// two revisions, while its status shows the rollout
// (updatedNumberScheduled 1 of 2: the controller counts node-1 by its old
// pod): a rollout in progress, not a conflict; healthy. Once the old pod is
// terminating the status may show every node updated: still a rollout.
func TestRolloutOverlap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		updated int32
		old     func(corev1.Pod) corev1.Pod
		want    string
	}{
		{"status shows the rollout", 1, func(p corev1.Pod) corev1.Pod { return p },
			"rollout in progress: pods csi-registrar/node-old (revision 6d4f8c9b7) and csi-registrar/node-new (revision 7b5c9d8f6) of DaemonSet csi-registrar/csi-stub-node on this node (updatedNumberScheduled 1 of desiredNumberScheduled 2)"},
		{"old pod terminating", 2, terminating,
			"rollout in progress: pods csi-registrar/node-old (revision 6d4f8c9b7, terminating) and csi-registrar/node-new (revision 7b5c9d8f6) of DaemonSet csi-registrar/csi-stub-node on this node (updatedNumberScheduled 2 of desiredNumberScheduled 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := rollingDaemonSet("csi-stub-node", 2, tc.updated)
			pods := []corev1.Pod{
				tc.old(revPod(ds, "node-1", "node-old", "6d4f8c9b7", t0)),
				revPod(ds, "node-1", "node-new", "7b5c9d8f6", t0.Add(30*time.Second)),
				revPod(ds, "node-2", "node-2-new", "7b5c9d8f6", t0.Add(10*time.Second)),
			}
			r := statusOf(t, append(ptrs(ds), ptrs(pods...)...)...)
			d := driverOf(t, r, stub)
			n := nodeOf(t, r, stub, "node-1")
			if n.Overlap != tc.want || n.Conflict != "" || n.State != StateRegistered || n.Pod != "csi-registrar/node-new" {
				t.Errorf("node-1: %+v\nwant overlap %q", n, tc.want)
			}
			if d.Overlapping != 1 || d.Conflicts != 0 || d.Registered != 2 || r.ExitCode() != ExitHealthy {
				t.Errorf("driver %+v, exit %d: want a rollout on 1 node, healthy", d, r.ExitCode())
			}
			if n2 := nodeOf(t, r, stub, "node-2"); n2.Overlap != "" || n2.Conflict != "" {
				t.Errorf("node-2 has one pod: %+v", n2)
			}
			checkTableWide(t, r, "DaemonSet csi-registrar/csi-stub-node; rollout or replacement in progress on 1 node(s)", tc.want)
		})
	}
}

// TestConflictOverlap: pods that stay side by side on node-1 are a
// conflict (exit 1): of two DaemonSets for one driver, of one revision of
// one DaemonSet, or of two revisions while the DaemonSet's status shows no
// rollout. A pod of another DaemonSet that is terminating leaves: a
// replacement, healthy.
func TestConflictOverlap(t *testing.T) {
	a := rollingDaemonSet("csi-stub-node", 2, 2)
	b := rollingDaemonSet("csi-stub-copy", 1, 1)
	for _, tc := range []struct {
		name     string
		objs     []runtime.Object
		conflict string // "" : no conflict; then overlap
		overlap  string
	}{
		{"two DaemonSets", append(ptrs(a, b), ptrs(
			revPod(a, "node-1", "a-1", "6d4f8c9b7", t0), revPod(a, "node-2", "a-2", "6d4f8c9b7", t0),
			revPod(b, "node-1", "b-1", "5a3e7b6c4", t0.Add(time.Hour)))...),
			"conflict: pods csi-registrar/a-1 (DaemonSet csi-registrar/csi-stub-node) and csi-registrar/b-1 (DaemonSet csi-registrar/csi-stub-copy) serve the driver on this node: two node plugins register one driver name; keep one per driver (delete the other DaemonSet)", ""},
		{"one revision", append(ptrs(a), ptrs(
			revPod(a, "node-1", "a-1", "6d4f8c9b7", t0), revPod(a, "node-1", "a-1b", "6d4f8c9b7", t0.Add(time.Minute)),
			revPod(a, "node-2", "a-2", "6d4f8c9b7", t0))...),
			"conflict: pods csi-registrar/a-1 (revision 6d4f8c9b7) and csi-registrar/a-1b (revision 6d4f8c9b7) of DaemonSet csi-registrar/csi-stub-node on this node, of one revision: not a rollout; two registrars for one driver name: delete the extra pod", ""},
		{"two revisions, no rollout", append(ptrs(a), ptrs(
			revPod(a, "node-1", "a-1", "6d4f8c9b7", t0), revPod(a, "node-1", "a-1b", "7b5c9d8f6", t0.Add(time.Minute)),
			revPod(a, "node-2", "a-2", "6d4f8c9b7", t0))...),
			"conflict: pods csi-registrar/a-1 (revision 6d4f8c9b7) and csi-registrar/a-1b (revision 7b5c9d8f6) of DaemonSet csi-registrar/csi-stub-node stay on this node although its status shows no rollout (updatedNumberScheduled 2 of desiredNumberScheduled 2, no pod terminating): two registrars for one driver name; delete the pod of the old revision", ""},
		{"other DaemonSet's pod terminating", append(ptrs(a), ptrs(
			terminating(revPod(b, "node-1", "b-1", "5a3e7b6c4", t0)), revPod(a, "node-1", "a-1", "6d4f8c9b7", t0.Add(time.Hour)),
			revPod(a, "node-2", "a-2", "6d4f8c9b7", t0))...),
			"", "replacement in progress: pods csi-registrar/b-1 (DaemonSet csi-registrar/csi-stub-copy, terminating) and csi-registrar/a-1 (DaemonSet csi-registrar/csi-stub-node) serve the driver on this node; the terminating one leaves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := statusOf(t, tc.objs...)
			d := driverOf(t, r, stub)
			n := nodeOf(t, r, stub, "node-1")
			if n.Conflict != tc.conflict || n.Overlap != tc.overlap {
				t.Errorf("node-1: conflict %q\nwant %q\noverlap %q\nwant %q", n.Conflict, tc.conflict, n.Overlap, tc.overlap)
			}
			wantConflicts, wantExit := 0, ExitHealthy
			if tc.conflict != "" {
				wantConflicts, wantExit = 1, ExitUnhealthy
			}
			if d.Conflicts != wantConflicts || r.ExitCode() != wantExit {
				t.Errorf("driver %+v, exit %d: want %d conflict(s), exit %d", d, r.ExitCode(), wantConflicts, wantExit)
			}
			if tc.conflict != "" {
				checkTableWide(t, r, "conflict on 1 node(s): two node plugins serve the driver (-o wide names the pods)", tc.conflict)
			}
		})
	}
}

// TestNoOverlapUnchanged: one pod per node, as without the rolling-update
// mode: no overlap, no conflict, and the JSON report holds neither field.
func TestNoOverlapUnchanged(t *testing.T) {
	a := rollingDaemonSet("csi-stub-node", 2, 2)
	r := statusOf(t, append(ptrs(a), ptrs(revPod(a, "node-1", "a-1", "6d4f8c9b7", t0), revPod(a, "node-2", "a-2", "6d4f8c9b7", t0))...)...)
	if r.ExitCode() != ExitHealthy {
		t.Errorf("exit %d: %+v", r.ExitCode(), r.Drivers)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"conflict`, `"overlap`} {
		if strings.Contains(string(b), field) {
			t.Errorf("JSON holds %s: %s", field, b)
		}
	}
}
