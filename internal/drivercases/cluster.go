package drivercases

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Kubectl runs kubectl on the cluster under test with args and returns its
// combined output; the error carries that output.
type Kubectl func(ctx context.Context, args ...string) (string, error)

// Cluster is what the cases run on.
type Cluster struct {
	Client  kubernetes.Interface
	Kubectl Kubectl
	Node    Node
	Dialer  Dialer // nil: the node's sockets cannot be dialed from here
	// Provider names the cluster in the table ("local", "kind", a context).
	Provider string
}

// workloadCluster is the Cluster with the node plugin workload's pods
// located: its namespace and label selector.
type workloadCluster struct {
	Cluster
	Namespace string
	Selector  string
	Workload  string // for errors
}

// NodeNames returns the names of the cluster's nodes, sorted.
func NodeNames(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nl.Items))
	for _, n := range nl.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// Pods returns the workload's pods that are bound to a node and not
// terminating, by node name.
func (c *workloadCluster) Pods(ctx context.Context) (map[string]*corev1.Pod, error) {
	return PodsByNode(ctx, c.Client, c.Namespace, c.Selector, c.Workload)
}

// DuplicatePodsError: two pods of a workload, neither deleting, on one node
// (during a rollout with maxSurge, or a broken deployment).
type DuplicatePodsError struct {
	Workload string
	Node     string
	Pods     [2]string
}

func (e *DuplicatePodsError) Error() string {
	return "two pods of " + e.Workload + " on node " + e.Node + ": " + e.Pods[0] + " and " + e.Pods[1]
}

// PodsByNode returns the pods of namespace that selector selects, bound to
// a node and not terminating, by node name; workload names them in errors.
// (A pod the scheduler has not bound yet has no node name: a DaemonSet's
// new pods can be listed in that state.) Two on one node are a
// *DuplicatePodsError.
func PodsByNode(ctx context.Context, c kubernetes.Interface, namespace, selector, workload string) (map[string]*corev1.Pod, error) {
	l, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	pods := map[string]*corev1.Pod{}
	for i := range l.Items {
		p := &l.Items[i]
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		if other, dup := pods[p.Spec.NodeName]; dup {
			return nil, &DuplicatePodsError{Workload: workload, Node: p.Spec.NodeName, Pods: [2]string{other.Name, p.Name}}
		}
		pods[p.Spec.NodeName] = p
	}
	return pods, nil
}

// PodOn returns the workload's pod on node.
func (c *workloadCluster) PodOn(ctx context.Context, node string) (*corev1.Pod, error) {
	return PodOn(ctx, c.Client, c.Namespace, c.Selector, c.Workload, node)
}

// PodOn returns the pod on node of the pods PodsByNode finds.
func PodOn(ctx context.Context, c kubernetes.Interface, namespace, selector, workload, node string) (*corev1.Pod, error) {
	pods, err := PodsByNode(ctx, c, namespace, selector, workload)
	if err != nil {
		return nil, err
	}
	if p := pods[node]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("no pod of %s on node %s", workload, node)
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ContainerStatus returns the status of the named container.
func ContainerStatus(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{Name: name}
}

// ContainerID strips the runtime prefix (containerd://) from a container ID.
func ContainerID(s corev1.ContainerStatus) string {
	if _, id, ok := strings.Cut(s.ContainerID, "://"); ok {
		return id
	}
	return s.ContainerID
}

// podContainers returns the statuses of the pod's containers by name.
func podContainers(p *corev1.Pod) map[string]corev1.ContainerStatus {
	m := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		m[s.Name] = s
	}
	return m
}

// waitingReasons summarises why a pod's containers are not running.
func waitingReasons(p *corev1.Pod) string {
	var out []string
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case s.State.Waiting != nil:
			out = append(out, fmt.Sprintf("container %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Terminated != nil:
			out = append(out, fmt.Sprintf("container %s terminated: %s (exit %d) %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message))
		case !s.Ready:
			out = append(out, fmt.Sprintf("container %s not ready", s.Name))
		}
	}
	if len(out) == 0 {
		return "containers running"
	}
	return strings.Join(out, "; ")
}

// Registration is what the kubelet wrote for a driver on a node: the facts
// csiplugin.Registration judges, as client-go reads them.
type Registration struct {
	Annotated  bool   // the driver's key is in the node annotation
	Annotation string // its value
	Entries    []storagev1.CSINodeDriver
	Labels     map[string]string // the node's labels
}

// Facts returns the registration as csiplugin's rule reads it.
func (r Registration) Facts() csiplugin.Registration {
	f := csiplugin.Registration{Annotated: r.Annotated, AnnotationID: r.Annotation}
	if len(r.Entries) > 0 {
		f.InCSINode, f.CSINodeID = true, r.Entries[0].NodeID
	}
	return f
}

// Registered reports whether the kubelet has the driver registered on the
// node, by the one rule (csiplugin.Registration.Registered).
func (r Registration) Registered() bool { return r.Facts().Registered() }

// Problem says why Registered does not hold ("" when it does).
func (r Registration) Problem() string { return r.Facts().Problem() }

// Absent reports that the kubelet wrote nothing for the driver on the node:
// no CSINode entry, no annotation key (an uninstalled driver).
func (r Registration) Absent() bool { return r.Facts().Absent() }

// AnnotationMap decodes the node ID annotation ({} when absent), as
// csiplugin.ParseNodeIDAnnotation does for every reader of it.
func AnnotationMap(n *corev1.Node) (map[string]string, error) {
	m, err := csiplugin.ParseNodeIDAnnotation(n.Annotations[csiplugin.NodeIDAnnotation])
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return m, nil
}

// CSINodeEntries returns the CSINode's entries for driver.
func CSINodeEntries(cn *storagev1.CSINode, driver string) []storagev1.CSINodeDriver {
	if cn == nil {
		return nil
	}
	var out []storagev1.CSINodeDriver
	for _, d := range cn.Spec.Drivers {
		if d.Name == driver {
			out = append(out, d)
		}
	}
	return out
}

// RegistrationOf reads the registration of driver from a Node and its
// CSINode (either nil: absent).
func RegistrationOf(n *corev1.Node, cn *storagev1.CSINode, driver string) (Registration, error) {
	var r Registration
	if n != nil {
		m, err := AnnotationMap(n)
		if err != nil {
			return r, err
		}
		r.Annotation, r.Annotated = m[driver]
		r.Labels = n.Labels
	}
	r.Entries = CSINodeEntries(cn, driver)
	return r, nil
}

// ReadRegistration reads what the kubelet wrote for the driver on node.
func ReadRegistration(ctx context.Context, c kubernetes.Interface, node, driver string) (Registration, error) {
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return Registration{}, err
	}
	cn, err := c.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cn = nil
	case err != nil:
		return Registration{}, err
	}
	return RegistrationOf(n, cn, driver)
}

func (c *workloadCluster) Registered(ctx context.Context, node, driver string) (Registration, error) {
	return ReadRegistration(ctx, c.Client, node, driver)
}
