//go:build e2e

package e2e

import (
	"context"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	recorder "github.com/csi-registrar/csi-registrar/internal/drivercases/record"
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
	return drivercases.RecordNode(ctx, c.Client, name)
}

// RecordCSINode records the changes of one CSINode.
func (c *Cluster) RecordCSINode(ctx context.Context, name string) (*Recorder, error) {
	return drivercases.RecordCSINode(ctx, c.Client, name)
}

// RecordPods records the changes of the DaemonSet's pods (keyed by UID).
func (c *Cluster) RecordPods(ctx context.Context) (*Recorder, error) {
	return drivercases.RecordPods(ctx, c.Client, c.Namespace, c.Selector)
}
