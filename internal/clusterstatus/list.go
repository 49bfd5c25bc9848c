package clusterstatus

import (
	"context"
	"fmt"

	"github.com/csi-registrar/csi-registrar/internal/nodeplugin"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// listPageSize is the page size of the list calls (kubectl's --chunk-size).
const listPageSize = 500

// list reads a snapshot: one paginated list per resource kind. A kind that
// cannot be listed is recorded in Snapshot.Unknown, with the permission
// when the API server refused it; the other kinds are still read.
// namespace limits the pods and DaemonSets read ("" for all namespaces).
func list(ctx context.Context, client kubernetes.Interface, namespace string) (*Snapshot, error) {
	snap := &Snapshot{Missing: map[string]bool{}, Namespace: namespace}
	scope := "in all namespaces"
	if namespace != "" {
		scope = "in namespace " + namespace
	}
	kinds := []struct {
		resource, group, scope, consequence string
		list                                func(context.Context, metav1.ListOptions) (runtime.Object, error)
		keep                                func(runtime.Object) error
	}{
		{"nodes", "", "cluster-wide", "the nodes are known only from their CSINodes; none can be told not expected",
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Nodes().List(ctx, o)
			},
			func(o runtime.Object) error {
				n := o.(*corev1.Node)
				n.ManagedFields = nil
				snap.Nodes = append(snap.Nodes, *n)
				return nil
			}},
		{"csinodes", "storage.k8s.io", "cluster-wide", "no node can be told registered",
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.StorageV1().CSINodes().List(ctx, o)
			},
			func(o runtime.Object) error {
				c := o.(*storagev1.CSINode)
				c.ManagedFields = nil
				snap.CSINodes = append(snap.CSINodes, *c)
				return nil
			}},
		{"csidrivers", "storage.k8s.io", "cluster-wide", "drivers without a CSINode entry or a node plugin pod are not listed",
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.StorageV1().CSIDrivers().List(ctx, o)
			},
			func(o runtime.Object) error {
				snap.CSIDrivers = append(snap.CSIDrivers, *o.(*storagev1.CSIDriver))
				return nil
			}},
		{"pods", "", scope, "node plugin pods are not known: nodes are registered or unknown, none stale",
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Pods(namespace).List(ctx, o)
			},
			func(o runtime.Object) error {
				p := o.(*corev1.Pod)
				if _, ok := nodeplugin.Recognize(p); ok {
					p.ManagedFields = nil
					snap.Pods = append(snap.Pods, *p)
				}
				return nil
			}},
		{"daemonsets", "apps", scope, "nodes without a node plugin pod cannot be told expected or not",
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.AppsV1().DaemonSets(namespace).List(ctx, o)
			},
			func(o runtime.Object) error {
				snap.DaemonSets = append(snap.DaemonSets, *o.(*appsv1.DaemonSet))
				return nil
			}},
	}
	for _, k := range kinds {
		p := pager.New(pager.ListPageFunc(k.list))
		p.PageSize = listPageSize
		err := p.EachListItem(ctx, metav1.ListOptions{}, k.keep)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		snap.Missing[k.resource] = true
		u := Unknown{What: k.resource + " (" + k.scope + ")", Error: err.Error(), Consequence: k.consequence}
		if apierrors.IsForbidden(err) {
			u.Permission = permission("list", k.resource, k.group, k.scope)
		}
		snap.Unknown = append(snap.Unknown, u)
	}
	return snap, nil
}

// permission names an RBAC rule as kubectl auth can-i takes it.
func permission(verb, resource, group, scope string) string {
	r := resource
	if group != "" {
		r += "." + group
	}
	return fmt.Sprintf("%s %s (%s)", verb, r, scope)
}
