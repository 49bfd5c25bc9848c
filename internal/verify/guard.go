package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
)

// Refusal is why verify will not run on this cluster; the command exits 2.
type Refusal struct{ Reasons []string }

func (r *Refusal) Error() string {
	return "refusing to run:\n  - " + strings.Join(r.Reasons, "\n  - ")
}

// pickNodes returns the nodes verify acts on: those named (each must exist),
// every node with all, else one: the first (by name) Ready node that
// carries MarkerLabel, else the first Ready node.
func pickNodes(nodes []corev1.Node, named []string, all bool) ([]string, error) {
	byName := map[string]*corev1.Node{}
	var names []string
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
		names = append(names, nodes[i].Name)
	}
	slices.Sort(names)
	if all {
		return names, nil
	}
	if len(named) > 0 {
		for _, n := range named {
			if byName[n] == nil {
				return nil, fmt.Errorf("--node=%s: the cluster has no such node (its nodes: %s)", n, strings.Join(names, ", "))
			}
		}
		return named, nil
	}
	var ready []string
	for _, n := range names {
		if nodeReady(byName[n]) {
			if byName[n].Labels[MarkerLabel] == "true" {
				return []string{n}, nil
			}
			ready = append(ready, n)
		}
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("no node of the cluster is Ready (nodes: %s): verify needs one to act on", strings.Join(names, ", "))
	}
	return ready[:1], nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkMarker refuses nodes without MarkerLabel=true unless disruptive.
func checkMarker(nodes []corev1.Node, targets []string, disruptive bool) []string {
	if disruptive {
		return nil
	}
	var out []string
	for _, t := range targets {
		for _, n := range nodes {
			if n.Name == t && n.Labels[MarkerLabel] != "true" {
				out = append(out, fmt.Sprintf("node %s does not carry the label %s=true that marks a node meant for disruptive tests (the project's local node and kind clusters carry it); verify restarts its kubelet and kills containers there. Fix: pass --i-know-this-is-disruptive, or label it: kubectl label node %s %s=true",
					t, MarkerLabel, t, MarkerLabel))
			}
		}
	}
	return out
}

// installed lists what shows that the driver of spec is already on the
// cluster: its workload, its CSIDriver objects, its registration on a node.
// verify installs and uninstalls the driver itself, so any of these would
// be another's and is refused, not touched.
func installed(ctx context.Context, c kubernetes.Interface, spec *driverspec.Spec, nodes []string) ([]string, error) {
	var out []string
	w := spec.Workload
	var err error
	switch w.Kind {
	case "DaemonSet":
		_, err = c.AppsV1().DaemonSets(spec.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "StatefulSet":
		_, err = c.AppsV1().StatefulSets(spec.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	case "Deployment":
		_, err = c.AppsV1().Deployments(spec.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	}
	switch {
	case err == nil:
		out = append(out, fmt.Sprintf("%s %s/%s exists: the driver under test is installed. Fix: uninstall it first (kubectl delete -f of its manifests), or verify on another cluster", w.Kind, spec.Namespace, w.Name))
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get %s: %w", w, err)
	}
	for _, name := range spec.CSIDrivers {
		if _, err := c.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{}); err == nil {
			out = append(out, fmt.Sprintf("CSIDriver %s exists: the driver under test is installed. Fix: uninstall it first", name))
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get CSIDriver %s: %w", name, err)
		}
	}
	if spec.DriverName != "" {
		for _, n := range nodes {
			r, err := drivercases.ReadRegistration(ctx, c, n, spec.DriverName)
			if err != nil {
				return nil, err
			}
			if !r.Absent() {
				out = append(out, fmt.Sprintf("node %s has driver %s registered (annotation %v, %d CSINode entries): it is installed there, or a registration was left behind. Fix: uninstall it; a registration with no driver running goes once its socket is removed from %s on that node",
					n, spec.DriverName, r.Annotated, len(r.Entries), drivercases.PluginsRegistry))
			}
		}
	}
	return out, nil
}

// leftoverSockets lists files of the driver in plugins_registry on the
// nodes: a registrar killed earlier leaves its socket, and the kubelet
// keeps the driver registered while it is there.
func leftoverSockets(ctx context.Context, n drivercases.Node, driver string, nodes []string) ([]string, error) {
	if driver == "" {
		return nil, nil
	}
	var out []string
	for _, node := range nodes {
		files, err := n.PluginsRegistry(ctx, node)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasPrefix(f.Name, driver) {
				out = append(out, fmt.Sprintf("node %s: %s/%s exists: a file of driver %s not made by this run. Fix: remove it on the node if no registrar of the driver runs there", node, drivercases.PluginsRegistry, f.Name, driver))
			}
		}
	}
	return out, nil
}
