package drivercases

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CurrentRevisionHash returns the controller-revision-hash of the
// DaemonSet's current template: that of the ControllerRevision it controls
// with the highest revision; "" while there is none yet. A rollout undo
// makes an earlier template current again by giving its ControllerRevision
// the next revision number, so the hash, not the pods'
// pod-template-generation (which the undo does not rewrite), tells the
// current pods.
func CurrentRevisionHash(ds *appsv1.DaemonSet, revisions []appsv1.ControllerRevision) string {
	var cur *appsv1.ControllerRevision
	for i := range revisions {
		r := &revisions[i]
		if metav1.IsControlledBy(r, ds) && (cur == nil || r.Revision > cur.Revision) {
			cur = r
		}
	}
	if cur == nil {
		return ""
	}
	return cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
}

// DaemonSetRolloutProblems is the one "rolled out" rule: it lists why the
// DaemonSet is not rolled out, given its ControllerRevisions and its pods by
// node (PodsByNode). Rolled out (nil) means: the controller observed the
// current generation and counts every scheduled pod updated and ready, and
// every node runs one pod of the current revision (CurrentRevisionHash),
// Ready.
func DaemonSetRolloutProblems(ds *appsv1.DaemonSet, revisions []appsv1.ControllerRevision, pods map[string]*corev1.Pod) []string {
	var p []string
	st := ds.Status
	if st.ObservedGeneration < ds.Generation || st.DesiredNumberScheduled == 0 ||
		st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled {
		p = append(p, fmt.Sprintf("DaemonSet generation %d (observed %d): desired %d, updated %d, ready %d",
			ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady))
	}
	hash := CurrentRevisionHash(ds, revisions)
	if hash == "" {
		// The controller has not written the template's revision yet.
		return append(p, fmt.Sprintf("DaemonSet %s/%s has no ControllerRevision yet", ds.Namespace, ds.Name))
	}
	for _, node := range slices.Sorted(maps.Keys(pods)) {
		pod := pods[node]
		if got := pod.Labels[appsv1.ControllerRevisionHashLabelKey]; got != hash {
			p = append(p, fmt.Sprintf("pod %s on %s is of revision %s, want %s", pod.Name, node, got, hash))
		}
		if !PodReady(pod) {
			p = append(p, fmt.Sprintf("pod %s on %s is not Ready: %s", pod.Name, node, waitingReasons(pod)))
		}
	}
	if len(pods) != int(st.DesiredNumberScheduled) {
		p = append(p, fmt.Sprintf("%d pods, want %d", len(pods), st.DesiredNumberScheduled))
	}
	return p
}

// ControllerRevisions lists the ControllerRevisions of the DaemonSet's
// namespace that its selector selects (CurrentRevisionHash keeps those it
// controls).
func ControllerRevisions(ctx context.Context, c kubernetes.Interface, ds *appsv1.DaemonSet) ([]appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	l, err := c.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// DaemonSetRollout reads the DaemonSet namespace/name, its revisions and its
// pods (selector, as PodsByNode) and judges them with
// DaemonSetRolloutProblems. The pods are returned for the caller's own
// checks; a *DuplicatePodsError (the old and the new pod side by side in a
// rollout with maxSurge) is a problem, not an error.
func DaemonSetRollout(ctx context.Context, c kubernetes.Interface, namespace, name, selector string) ([]string, map[string]*corev1.Pod, error) {
	ds, err := c.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	pods, err := PodsByNode(ctx, c, namespace, selector, "DaemonSet "+name)
	if dup := (*DuplicatePodsError)(nil); errors.As(err, &dup) {
		return []string{err.Error()}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	revs, err := ControllerRevisions(ctx, c, ds)
	if err != nil {
		return nil, nil, err
	}
	return DaemonSetRolloutProblems(ds, revs, pods), pods, nil
}
