//go:build e2e

package e2e

import (
	"context"

	recorder "github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// The recorder lives in internal/drivercases/record (the driver cases of
// `kubectl csi-registrar verify` use it too); these names keep the suite's.
type (
	State    = recorder.State
	Event    = recorder.Event
	Recorder = recorder.Recorder
)

// Initial is the Type of a Recorder's first Event.
const Initial = recorder.Initial

// RecordNode records the changes of one Node.
func (c *Cluster) RecordNode(ctx context.Context, name string) (*Recorder, error) {
	sel := "metadata.name=" + name
	return recorder.Start(ctx, "node "+name, recorder.NameKey,
		func(ctx context.Context) (runtime.Object, error) {
			return c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: sel})
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Client.CoreV1().Nodes().Watch(ctx, o)
		})
}

// RecordCSINode records the changes of one CSINode.
func (c *Cluster) RecordCSINode(ctx context.Context, name string) (*Recorder, error) {
	sel := "metadata.name=" + name
	return recorder.Start(ctx, "CSINode "+name, recorder.NameKey,
		func(ctx context.Context) (runtime.Object, error) {
			return c.Client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{FieldSelector: sel})
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Client.StorageV1().CSINodes().Watch(ctx, o)
		})
}

// RecordPods records the changes of the DaemonSet's pods (keyed by UID).
func (c *Cluster) RecordPods(ctx context.Context) (*Recorder, error) {
	return recorder.Start(ctx, "pods "+c.Selector, recorder.UIDKey,
		func(ctx context.Context) (runtime.Object, error) {
			return c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: c.Selector})
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = c.Selector
			return c.Client.CoreV1().Pods(c.Namespace).Watch(ctx, o)
		})
}
