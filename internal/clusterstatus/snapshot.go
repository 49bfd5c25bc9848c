package clusterstatus

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Snapshot is what the API server holds that the answer is computed from:
// one list per resource kind, never a call per node.
type Snapshot struct {
	Nodes      []corev1.Node
	CSINodes   []storagev1.CSINode
	CSIDrivers []storagev1.CSIDriver
	// Pods are the node plugin pods only (nodeplugin.Recognize), in the
	// namespace asked for or all namespaces.
	Pods       []corev1.Pod
	DaemonSets []appsv1.DaemonSet
	// Unknown lists the kinds that could not be listed.
	Unknown []Unknown
	// Missing marks the kinds in Unknown, by resource name ("pods", ...).
	Missing map[string]bool
	// Namespace is the namespace Pods and DaemonSets were read in; "" for
	// all namespaces.
	Namespace string
}
