package verify

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
)

// These tests run the cleanup and refusal logic on client-go's fake
// clientset (an in-memory object tracker, not a cluster).

func meta(ns, name string, ours bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name}
	if ours {
		m.Labels = map[string]string{RunLabel: "r1"}
	}
	return m
}

func TestFakeCleanupRemovesOnlyLabelledObjects(t *testing.T) {
	c := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: meta("", "csi-registrar-verify-abc", true)},
		&corev1.Namespace{ObjectMeta: meta("", "kube-system", false)},
		&corev1.Pod{ObjectMeta: meta("csi-registrar-verify-abc", "node-pod", true)},
		&corev1.Pod{ObjectMeta: meta("default", "someone-elses", false)},
		&appsv1.DaemonSet{ObjectMeta: meta("drv", "drv-node", true)},
		&appsv1.DaemonSet{ObjectMeta: meta("kube-system", "other-node", false)},
		&storagev1.CSIDriver{ObjectMeta: meta("", "drv.csi.example.com", true)},
		&storagev1.CSIDriver{ObjectMeta: meta("", "other.csi.example.com", false)},
	)
	removed, err := Cleanup(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{"CSIDriver drv.csi.example.com", "DaemonSet drv/drv-node", "Namespace csi-registrar-verify-abc", "Pod csi-registrar-verify-abc/node-pod"}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	ctx := context.Background()
	if _, err := c.CoreV1().Pods("default").Get(ctx, "someone-elses", metav1.GetOptions{}); err != nil {
		t.Errorf("an unlabelled pod was touched: %v", err)
	}
	if _, err := c.AppsV1().DaemonSets("kube-system").Get(ctx, "other-node", metav1.GetOptions{}); err != nil {
		t.Errorf("an unlabelled DaemonSet was touched: %v", err)
	}
	if _, err := c.StorageV1().CSIDrivers().Get(ctx, "other.csi.example.com", metav1.GetOptions{}); err != nil {
		t.Errorf("an unlabelled CSIDriver was touched: %v", err)
	}
	again, err := Cleanup(ctx, c)
	if err != nil || len(again) != 0 {
		t.Errorf("a second cleanup removed %q (%v), want nothing", again, err)
	}
}

// An interrupted run (SIGINT, SIGTERM: its context ends) removes what it
// made, with a context of its own, and only that.
func TestFakeInterruptedRunRemovesWhatItMade(t *testing.T) {
	c := fake.NewClientset(&corev1.Pod{ObjectMeta: meta("default", "someone-elses", false)})
	var deleted []string
	tr := &tracker{client: c, kubectl: func(_ context.Context, args ...string) (string, error) {
		deleted = append(deleted, strings.Join(args, " "))
		return "", nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	ns, _ := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: meta("", "csi-registrar-verify-x", true)}, metav1.CreateOptions{})
	tr.add(kindNamespace, "", ns.Name)
	p, _ := c.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{ObjectMeta: meta(ns.Name, "node", true)}, metav1.CreateOptions{})
	tr.add(kindPod, ns.Name, p.Name)
	tr.add(kindManifests, "", "/tmp/applied.yaml")
	cancel() // the signal

	done, err := tr.removeAll(context.WithoutCancel(ctx))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"the objects of /tmp/applied.yaml", "pod csi-registrar-verify-x/node", "namespace csi-registrar-verify-x"}
	if !slices.Equal(done, want) {
		t.Errorf("removed %q, want %q (newest first)", done, want)
	}
	if len(deleted) != 1 || !strings.HasPrefix(deleted[0], "delete -f /tmp/applied.yaml --ignore-not-found") {
		t.Errorf("kubectl calls %q, want one delete -f of the applied manifests", deleted)
	}
	if _, err := c.CoreV1().Pods("default").Get(context.Background(), "someone-elses", metav1.GetOptions{}); err != nil {
		t.Errorf("a pod it did not make was touched: %v", err)
	}
	if left, _ := tr.removeAll(context.Background()); len(left) != 0 {
		t.Errorf("a second removal did %q, want nothing", left)
	}
}

func node(name string, ready, marked bool) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if marked {
		n.Labels[MarkerLabel] = "true"
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	return n
}

func TestPickNodes(t *testing.T) {
	nodes := []corev1.Node{node("c", true, false), node("b", true, true), node("a", false, true)}
	for _, tc := range []struct {
		named []string
		all   bool
		want  string
		err   string
	}{
		{want: "b"}, // the first Ready node with the marker
		{all: true, want: "a,b,c"},
		{named: []string{"c"}, want: "c"},
		{named: []string{"z"}, err: "--node=z: the cluster has no such node (its nodes: a, b, c)"},
	} {
		got, err := pickNodes(nodes, tc.named, tc.all)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%v: err %v, want %q", tc.named, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%v %v: %v %v, want %s", tc.named, tc.all, got, err, tc.want)
		}
	}
	if got, _ := pickNodes([]corev1.Node{node("y", true, false), node("x", true, false)}, nil, false); strings.Join(got, ",") != "x" {
		t.Errorf("without a marked node: %v, want the first Ready one, x", got)
	}
}

func TestFakeRefusesAnUnmarkedNodeUnlessDisruptive(t *testing.T) {
	nodes := []corev1.Node{node("prod-1", true, false), node("test-1", true, true)}
	r := checkMarker(nodes, []string{"prod-1", "test-1"}, false)
	if len(r) != 1 || !strings.Contains(r[0], "node prod-1 does not carry the label "+MarkerLabel+"=true") ||
		!strings.Contains(r[0], "--i-know-this-is-disruptive") || !strings.Contains(r[0], "kubectl label node prod-1 "+MarkerLabel+"=true") {
		t.Errorf("refusal %q: want prod-1 named with both fixes", r)
	}
	if r := checkMarker(nodes, []string{"prod-1"}, true); len(r) != 0 {
		t.Errorf("with --i-know-this-is-disruptive: %q, want none", r)
	}
}

func TestFakeRefusesAnInstalledDriver(t *testing.T) {
	spec := &driverspec.Spec{
		Workload:   driverspec.Workload{Kind: "DaemonSet", Name: "drv-node", Namespace: "drv"},
		Namespace:  "drv",
		DriverName: "drv.csi.example.com",
		CSIDrivers: []string{"drv.csi.example.com"},
	}
	clean := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if r, err := installed(context.Background(), clean, spec, []string{"n1"}); err != nil || len(r) != 0 {
		t.Fatalf("a clean cluster: %q %v, want no refusal", r, err)
	}
	c := fake.NewClientset(
		&appsv1.DaemonSet{ObjectMeta: meta("drv", "drv-node", false)},
		&storagev1.CSIDriver{ObjectMeta: meta("", "drv.csi.example.com", false)},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"csi.volume.kubernetes.io/nodeid": `{"drv.csi.example.com":"n1"}`}}},
		&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "drv.csi.example.com", NodeID: "n1"}}}},
	)
	r, err := installed(context.Background(), c, spec, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(r, "\n")
	for _, want := range []string{"DaemonSet drv/drv-node exists", "CSIDriver drv.csi.example.com exists", "node n1 has driver drv.csi.example.com registered (annotation true, 1 CSINode entries)", "Fix: uninstall"} {
		if !strings.Contains(all, want) {
			t.Errorf("refusal lacks %q:\n%s", want, all)
		}
	}
	// Refusing touches nothing.
	if _, err := c.AppsV1().DaemonSets("drv").Get(context.Background(), "drv-node", metav1.GetOptions{}); err != nil {
		t.Errorf("the refusal touched the DaemonSet: %v", err)
	}
}
