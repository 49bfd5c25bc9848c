package stubdriver

import (
	"context"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeServer implements the CSI Node service. The kubelet calls NodeGetInfo
// when the driver registers (and may call it again: keep it cheap).
type nodeServer struct {
	csi.UnimplementedNodeServer
	opts *Options
	vols *volumes // nil without a state directory
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

// NodeGetCapabilities reports one optional node capability, GET_VOLUME_STATS
// (the kubelet then asks NodeGetVolumeStats of each published volume for its
// /stats/summary and volume metrics): no staging (an ephemeral volume is
// published directly), no expansion.
func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_GET_VOLUME_STATS}},
	}}}, nil
}

// NodeGetVolumeStats reports the usage of a volume published at volume_path:
// bytes and inodes of the file system that holds the volume's directory
// (statfs), as a driver whose volumes are directories reports them.
//
// Errors, as the CSI spec orders them:
//   - INVALID_ARGUMENT: volume_id or volume_path missing.
//   - NOT_FOUND: no volume of that ID (never published, or unpublished, or
//     the driver has no state directory), or volume_path is not where it is
//     published (a relative volume_path never is).
//   - INTERNAL: statfs fails.
func (s *nodeServer) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	case path == "":
		return nil, status.Error(codes.InvalidArgument, "volume_path is missing")
	case s.vols == nil || validVolumeID(id) != nil:
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist: this driver publishes none of that ID", id)
	case !filepath.IsAbs(path):
		return nil, status.Errorf(codes.NotFound, "volume %q is not published at %q: the driver publishes at absolute target paths only", id, path)
	}
	return s.vols.stats(id, path)
}

// NodePublishVolume publishes a CSI ephemeral volume: it creates the
// volume's directory under the state directory and bind-mounts it at
// target_path, read-only if the request or the access mode says so. A volume
// already published there the same way is success (the call is idempotent).
//
// Errors, as the CSI spec orders them:
//   - INVALID_ARGUMENT: volume_id, target_path or volume_capability missing,
//     no access type, a relative target_path, a volume_id that cannot name
//     a directory, or a target_path that has a '..' element, resolves
//     (symbolic links followed) outside the kubelet's pods directory
//     (Options.KubeletPodsDir), or lies in the state directory.
//   - FAILED_PRECONDITION: the driver has no state directory (started without
//     --state-dir), or a block volume was asked for ("exceeds capabilities").
//   - NOT_FOUND: a request without volume_context csi.storage.k8s.io/ephemeral
//     "true". The driver has no controller, so no persistent volume exists.
//   - ALREADY_EXISTS: target_path has another mount on it, or this volume with
//     the other readonly setting.
//   - ABORTED: another operation on the same volume is in progress.
func (s *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target, vc := req.GetVolumeId(), req.GetTargetPath(), req.GetVolumeCapability()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	case vc == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is missing")
	case vc.GetBlock() != nil:
		return nil, status.Error(codes.FailedPrecondition, "block volumes are not supported: this driver publishes directories (access type mount)")
	case vc.GetMount() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability has no access type: set mount")
	case !filepath.IsAbs(target):
		return nil, status.Errorf(codes.InvalidArgument, "target_path %q is not an absolute path", target)
	case s.vols == nil:
		return nil, status.Error(codes.FailedPrecondition, "the driver was started without a state directory (--state-dir): it publishes no volumes")
	case req.GetVolumeContext()[EphemeralContextKey] != "true":
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist: this driver only serves CSI ephemeral volumes "+
			"(volume_context %s=true, which the kubelet sets for inline volumes of a CSIDriver with podInfoOnMount: true)",
			id, EphemeralContextKey)
	}
	if err := validVolumeID(id); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	at, err := s.vols.publishTarget(target)
	if err != nil {
		return nil, err
	}
	unlock, err := s.vols.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.vols.publish(id, at, req.GetReadonly() || readOnlyMode(vc.GetAccessMode().GetMode())); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// readOnlyMode reports whether an access mode allows reading only.
func readOnlyMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// NodeUnpublishVolume undoes NodePublishVolume: it unmounts this volume's
// mount at target_path, removes target_path, and removes the volume's
// directory with its data. A target or volume that is not there is success
// (the call is idempotent), and so is a volume ID this driver never
// published. Whatever is at target_path and was not mounted by publish (a
// file, a directory, a symbolic link, another mount) is left alone.
//
// Errors: INVALID_ARGUMENT when volume_id or target_path is missing or
// target_path is relative; ABORTED while another operation on the volume is
// in progress; INTERNAL when unmounting or removing fails.
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	case !filepath.IsAbs(target):
		return nil, status.Errorf(codes.InvalidArgument, "target_path %q is not an absolute path", target)
	case s.vols == nil || validVolumeID(id) != nil:
		// Nothing was, or could have been, published under this ID.
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	unlock, err := s.vols.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.vols.unpublish(id, target); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
