package stubdriver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeServer implements the CSI Node service. The kubelet calls NodeGetInfo
// when the driver registers (and may call it again: keep it cheap).
type nodeServer struct {
	csi.UnimplementedNodeServer
	opts *Options
}

// NodeGetInfo returns what the kubelet writes to the Node annotation
// csi.volume.kubernetes.io/nodeid, to the CSINode entry and to Node labels.
func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	rsp := &csi.NodeGetInfoResponse{NodeId: s.opts.NodeID, MaxVolumesPerNode: s.opts.MaxVolumesPerNode}
	if len(s.opts.Topology) > 0 {
		segs := make(map[string]string, len(s.opts.Topology))
		for k, v := range s.opts.Topology {
			segs[k] = v
		}
		rsp.AccessibleTopology = &csi.Topology{Segments: segs}
	}
	return rsp, nil
}

// NodeGetCapabilities reports no optional node capability: no staging, no
// volume stats, no expansion.
func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodePublishVolume checks its arguments as the CSI spec requires. The stub
// driver has no volumes to publish, so a valid request is Unimplemented.
func (s *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	return nil, status.Error(codes.Unimplemented, "the stub driver does not publish volumes")
}

// NodeUnpublishVolume checks its arguments as the CSI spec requires. Nothing
// was ever published, so a valid request succeeds (unpublish is idempotent).
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
