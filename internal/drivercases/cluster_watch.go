package drivercases

import (
	"context"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// RecordNode records the changes of one Node.
func RecordNode(ctx context.Context, c kubernetes.Interface, name string) (*record.Recorder, error) {
	sel := "metadata.name=" + name
	return record.Start(ctx, "node "+name, record.NameKey,
		func(ctx context.Context) (runtime.Object, error) {
			return c.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: sel})
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.CoreV1().Nodes().Watch(ctx, o)
		})
}

// RecordCSINode records the changes of one CSINode.
func RecordCSINode(ctx context.Context, c kubernetes.Interface, name string) (*record.Recorder, error) {
	sel := "metadata.name=" + name
	return record.Start(ctx, "CSINode "+name, record.NameKey,
		func(ctx context.Context) (runtime.Object, error) {
			return c.StorageV1().CSINodes().List(ctx, metav1.ListOptions{FieldSelector: sel})
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.StorageV1().CSINodes().Watch(ctx, o)
		})
}

// RecordPods records the changes of the pods of namespace that selector
// selects (keyed by UID).
func RecordPods(ctx context.Context, c kubernetes.Interface, namespace, selector string) (*record.Recorder, error) {
	return record.Start(ctx, "pods "+selector, record.UIDKey,
		func(ctx context.Context) (runtime.Object, error) {
			return c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return c.CoreV1().Pods(namespace).Watch(ctx, o)
		})
}

func (c *workloadCluster) RecordPods(ctx context.Context) (*record.Recorder, error) {
	return RecordPods(ctx, c.Client, c.Namespace, c.Selector)
}
