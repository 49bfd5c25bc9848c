package drivercases

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// undoneDaemonSet is a DaemonSet as the API server holds it after
// `kubectl rollout undo`: template A (generation 1, revision 1), a change
// to template B (generation 2, revision 2), then the undo back to A
// (generation 3): the controller gives A's ControllerRevision the next
// revision number, 3, and keeps A's hash. The pods of A that the undo finds
// (or that it brings back) carry A's hash, and the pod-template-generation
// of the template they were created from.
func undoneDaemonSet() (*appsv1.DaemonSet, []appsv1.ControllerRevision) {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plugin", UID: types.UID("ds-uid"), Generation: 3},
		Status:     appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberReady: 2},
	}
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "plugin", UID: ds.UID, Controller: ptr.To(true)}}
	rev := func(hash string, n int64) appsv1.ControllerRevision {
		return appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plugin-" + hash, OwnerReferences: owner,
				Labels: map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash}},
			Revision: n,
		}
	}
	other := rev("zzz", 9)
	other.OwnerReferences = nil // another owner's: not this DaemonSet's
	return ds, []appsv1.ControllerRevision{rev("bbb", 2), rev("aaa", 3), other}
}

func podOf(node, hash, generation string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plugin-" + node, Labels: map[string]string{
			appsv1.ControllerRevisionHashLabelKey: hash, "pod-template-generation": generation}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// TestRolledOutAfterUndo: after an undo, the pods of the template made
// current again are rolled out, although their pod-template-generation is
// not the DaemonSet's generation; the pods of the template undone are not.
func TestRolledOutAfterUndo(t *testing.T) {
	ds, revs := undoneDaemonSet()
	if got := CurrentRevisionHash(ds, revs); got != "aaa" {
		t.Fatalf("CurrentRevisionHash = %q, want aaa (the revision the undo renumbered 3)", got)
	}
	pods := map[string]*corev1.Pod{"n1": podOf("n1", "aaa", "1", true), "n2": podOf("n2", "aaa", "1", true)}
	if p := DaemonSetRolloutProblems(ds, revs, pods); p != nil {
		t.Errorf("pods of the current revision after the undo: problems %q, want none", p)
	}
	// The rule this replaces (pod-template-generation = the DaemonSet's
	// generation) calls these pods out of date: the case the rule must get
	// right.
	for n, p := range pods {
		if p.Labels["pod-template-generation"] == "3" {
			t.Fatalf("test setup: pod on %s has the DaemonSet's generation", n)
		}
	}

	pods["n2"] = podOf("n2", "bbb", "2", true)
	p := DaemonSetRolloutProblems(ds, revs, pods)
	if len(p) != 1 || !strings.Contains(p[0], "pod plugin-n2 on n2 is of revision bbb, want aaa") {
		t.Errorf("a pod of the template undone: problems %q, want the one on n2 out of date", p)
	}
}

func TestRolledOutProblems(t *testing.T) {
	ds, revs := undoneDaemonSet()
	ready := map[string]*corev1.Pod{"n1": podOf("n1", "aaa", "3", true), "n2": podOf("n2", "aaa", "3", true)}
	cases := []struct {
		name string
		edit func(*appsv1.DaemonSet, map[string]*corev1.Pod) []appsv1.ControllerRevision
		want string
	}{
		{"generation not observed", func(d *appsv1.DaemonSet, _ map[string]*corev1.Pod) []appsv1.ControllerRevision {
			d.Status.ObservedGeneration = 2
			return revs
		}, "DaemonSet generation 3 (observed 2)"},
		{"not every pod updated", func(d *appsv1.DaemonSet, _ map[string]*corev1.Pod) []appsv1.ControllerRevision {
			d.Status.UpdatedNumberScheduled = 1
			return revs
		}, "updated 1"},
		{"no revision yet", func(*appsv1.DaemonSet, map[string]*corev1.Pod) []appsv1.ControllerRevision { return nil }, "has no ControllerRevision yet"},
		{"a pod not Ready", func(_ *appsv1.DaemonSet, p map[string]*corev1.Pod) []appsv1.ControllerRevision {
			p["n1"] = podOf("n1", "aaa", "3", false)
			return revs
		}, "pod plugin-n1 on n1 is not Ready"},
		{"a node without its pod", func(_ *appsv1.DaemonSet, p map[string]*corev1.Pod) []appsv1.ControllerRevision {
			delete(p, "n2")
			return revs
		}, "1 pods, want 2"},
	}
	for _, c := range cases {
		d := ds.DeepCopy()
		pods := map[string]*corev1.Pod{}
		for n, p := range ready {
			pods[n] = p.DeepCopy()
		}
		got := DaemonSetRolloutProblems(d, c.edit(d, pods), pods)
		if !strings.Contains(strings.Join(got, "; "), c.want) {
			t.Errorf("%s: problems %q, want one with %q", c.name, got, c.want)
		}
	}
	if p := DaemonSetRolloutProblems(ds, revs, ready); p != nil {
		t.Errorf("rolled out: problems %q", p)
	}
}
