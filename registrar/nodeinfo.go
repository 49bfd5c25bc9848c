package registrar

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// sameNodeInfo asks the drivers at a and b for NodeGetInfo and reports
// whether the kubelet would record the same values for both (node ID, the
// volume limit, topology): only then can the endpoint move from one to the
// other without the kubelet registering the driver again.
func sameNodeInfo(ctx context.Context, a, b string, timeout time.Duration) (bool, error) {
	ia, err := nodeInfo(ctx, a, timeout)
	if err != nil {
		return false, err
	}
	ib, err := nodeInfo(ctx, b, timeout)
	if err != nil {
		return false, err
	}
	return ia.GetNodeId() == ib.GetNodeId() && ia.GetMaxVolumesPerNode() == ib.GetMaxVolumesPerNode() &&
		maps.Equal(ia.GetAccessibleTopology().GetSegments(), ib.GetAccessibleTopology().GetSegments()), nil
}

// nodeInfo calls Node.NodeGetInfo on the driver socket at path.
func nodeInfo(ctx context.Context, path string, timeout time.Duration) (*csi.NodeGetInfoResponse, error) {
	conn, err := csiplugin.Dial(path)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rsp, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("NodeGetInfo on %s: %w", path, err)
	}
	return rsp, nil
}
