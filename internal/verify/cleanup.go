package verify

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// lister lists the names (namespace/name for namespaced kinds) of the
// objects of one kind with a label selector, and deletes one.
type lister struct {
	kind   string
	list   func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error)
	delete func(ctx context.Context, namespace, name string) error
}

func metas[T any](items []T, meta func(*T) metav1.ObjectMeta) []metav1.ObjectMeta {
	out := make([]metav1.ObjectMeta, 0, len(items))
	for i := range items {
		out = append(out, meta(&items[i]))
	}
	return out
}

// labelled are the kinds --cleanup looks for: those verify creates itself
// (namespace, node pods) and those a driver's manifests hold. Namespaces
// come last: their objects go with them.
func labelled(c kubernetes.Interface) []lister {
	del := metav1.DeleteOptions{}
	return []lister{
		{"DaemonSet", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.AppsV1().DaemonSets("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *appsDaemonSet) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.AppsV1().DaemonSets(ns).Delete(ctx, n, del) }},
		{"StatefulSet", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.AppsV1().StatefulSets("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *appsStatefulSet) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.AppsV1().StatefulSets(ns).Delete(ctx, n, del) }},
		{"Deployment", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.AppsV1().Deployments("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *appsDeployment) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.AppsV1().Deployments(ns).Delete(ctx, n, del) }},
		{"Pod", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.CoreV1().Pods("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *corePod) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.CoreV1().Pods(ns).Delete(ctx, n, del) }},
		{"ServiceAccount", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.CoreV1().ServiceAccounts("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *coreServiceAccount) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error {
			return c.CoreV1().ServiceAccounts(ns).Delete(ctx, n, del)
		}},
		{"ConfigMap", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.CoreV1().ConfigMaps("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *coreConfigMap) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.CoreV1().ConfigMaps(ns).Delete(ctx, n, del) }},
		{"Service", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.CoreV1().Services("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *coreService) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.CoreV1().Services(ns).Delete(ctx, n, del) }},
		{"Role", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.RbacV1().Roles("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *rbacRole) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.RbacV1().Roles(ns).Delete(ctx, n, del) }},
		{"RoleBinding", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.RbacV1().RoleBindings("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *rbacRoleBinding) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, ns, n string) error { return c.RbacV1().RoleBindings(ns).Delete(ctx, n, del) }},
		{"ClusterRole", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.RbacV1().ClusterRoles().List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *rbacClusterRole) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, _, n string) error { return c.RbacV1().ClusterRoles().Delete(ctx, n, del) }},
		{"ClusterRoleBinding", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.RbacV1().ClusterRoleBindings().List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *rbacClusterRoleBinding) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, _, n string) error {
			return c.RbacV1().ClusterRoleBindings().Delete(ctx, n, del)
		}},
		{"CSIDriver", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.StorageV1().CSIDrivers().List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *storageCSIDriver) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, _, n string) error { return c.StorageV1().CSIDrivers().Delete(ctx, n, del) }},
		{"StorageClass", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.StorageV1().StorageClasses().List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *storageClass) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, _, n string) error {
			return c.StorageV1().StorageClasses().Delete(ctx, n, del)
		}},
		{"Namespace", func(ctx context.Context, o metav1.ListOptions) ([]metav1.ObjectMeta, error) {
			l, err := c.CoreV1().Namespaces().List(ctx, o)
			if err != nil {
				return nil, err
			}
			return metas(l.Items, func(x *coreNamespace) metav1.ObjectMeta { return x.ObjectMeta }), nil
		}, func(ctx context.Context, _, n string) error { return c.CoreV1().Namespaces().Delete(ctx, n, del) }},
	}
}

// Cleanup removes what earlier runs left: every object of the kinds verify
// creates or applies that carries RunLabel (of any run), and nothing else.
// It returns what it removed ("Kind namespace/name").
func Cleanup(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	opts := metav1.ListOptions{LabelSelector: RunLabel}
	var removed []string
	var errs []error
	for _, l := range labelled(c) {
		items, err := l.list(ctx, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s with label %s: %w", l.kind, RunLabel, err))
			continue
		}
		for _, m := range items {
			if m.Labels[RunLabel] == "" {
				continue // a selector the server ignored: never delete what is not ours
			}
			if err := l.delete(ctx, m.Namespace, m.Name); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", l.kind, qualified(m), err))
				continue
			}
			removed = append(removed, l.kind+" "+qualified(m))
		}
	}
	return removed, errors.Join(errs...)
}

func qualified(m metav1.ObjectMeta) string {
	if m.Namespace == "" {
		return m.Name
	}
	return m.Namespace + "/" + m.Name
}
