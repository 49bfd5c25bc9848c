package clusterstatus

import (
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Two node plugin pods of one driver on one node overlap. While a DaemonSet
// rolls out with maxSurge (csi-registrar --rolling-update), the new pod
// starts before the old one leaves: pods of two revisions of the one
// DaemonSet, while its status shows the rollout (the DaemonSet controller
// counts a node as updated by its oldest pod, so updatedNumberScheduled
// stays below desiredNumberScheduled until the old pod is gone), or the old
// pod terminating. That is a rollout in progress. Pods that stay side by
// side are a conflict: two registrars for one driver name on one node, and
// two drivers behind it: two DaemonSets (or another controller's pods)
// serving the driver, or two pods of one revision of a DaemonSet. A pod
// being deleted leaves: one terminating next to a pod of another node
// plugin is a replacement, not a conflict.

// overlapOf judges the driver's pods on one node: the note on a rollout or
// replacement in progress, or the conflict; both empty for one pod.
func overlapOf(pods []*corev1.Pod, groupOf map[*corev1.Pod]*pluginGroup) (overlap, conflict string) {
	if len(pods) < 2 {
		return "", ""
	}
	pods = append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) ||
			pods[i].CreationTimestamp.Equal(&pods[j].CreationTimestamp) && pods[i].Name < pods[j].Name
	})
	var staying []*corev1.Pod
	groups := map[*pluginGroup]bool{}
	for _, p := range pods {
		groups[groupOf[p]] = true
		if p.DeletionTimestamp == nil {
			staying = append(staying, p)
		}
	}
	stayingGroups := map[*pluginGroup]bool{}
	for _, p := range staying {
		stayingGroups[groupOf[p]] = true
	}
	if len(groups) > 1 {
		list := podList(pods, func(p *corev1.Pod) string { return groupOf[p].key })
		if len(stayingGroups) > 1 {
			return "", "conflict: pods " + list + " serve the driver on this node: two node plugins register one driver name; keep one per driver (delete the other DaemonSet)"
		}
		return "replacement in progress: pods " + list + " serve the driver on this node; the terminating one leaves", ""
	}
	g := groupOf[pods[0]]
	revs := map[string]bool{}
	for _, p := range pods {
		revs[p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
	}
	list := podList(pods, func(p *corev1.Pod) string {
		if g.ds == nil {
			return ""
		}
		return "revision " + dash(p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey])
	})
	switch {
	case g.ds != nil && len(revs) > 1 && (rollingOut(g.ds) || len(staying) < len(pods)):
		return "rollout in progress: pods " + list + " of " + g.key + " on this node (" + rolloutText(g.ds) + ")", ""
	case len(staying) < 2:
		return "replacement in progress: pods " + list + " of " + g.key + " on this node; the terminating one leaves", ""
	case g.ds != nil && len(revs) > 1:
		return "", "conflict: pods " + list + " of " + g.key + " stay on this node although its status shows no rollout (" + rolloutText(g.ds) +
			", no pod terminating): two registrars for one driver name; delete the pod of the old revision"
	case g.ds != nil:
		return "", "conflict: pods " + list + " of " + g.key + " on this node, of one revision: not a rollout; two registrars for one driver name: delete the extra pod"
	}
	return "", "conflict: pods " + list + " of " + g.key + " serve the driver on this node: two registrars for one driver name; keep one"
}

// rollingOut reports whether the DaemonSet's status shows a rollout.
func rollingOut(ds *appsv1.DaemonSet) bool {
	return ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled || ds.Status.ObservedGeneration < ds.Generation
}

func rolloutText(ds *appsv1.DaemonSet) string {
	s := "updatedNumberScheduled " + strconv.Itoa(int(ds.Status.UpdatedNumberScheduled)) + " of desiredNumberScheduled " + strconv.Itoa(int(ds.Status.DesiredNumberScheduled))
	if ds.Status.ObservedGeneration < ds.Generation {
		s += ", generation " + strconv.FormatInt(ds.Generation, 10) + " not observed yet"
	}
	return s
}

// podList names pods, oldest first: "ns/a (DaemonSet ns/x, terminating)
// and ns/b (DaemonSet ns/y)".
func podList(pods []*corev1.Pod, what func(*corev1.Pod) string) string {
	parts := make([]string, len(pods))
	for i, p := range pods {
		var attrs []string
		if w := what(p); w != "" {
			attrs = append(attrs, w)
		}
		if p.DeletionTimestamp != nil {
			attrs = append(attrs, "terminating")
		}
		parts[i] = p.Namespace + "/" + p.Name
		if len(attrs) > 0 {
			parts[i] += " (" + strings.Join(attrs, ", ") + ")"
		}
	}
	if len(parts) == 2 {
		return parts[0] + " and " + parts[1]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
