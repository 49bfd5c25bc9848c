package stubdriver

import (
	"errors"
	"io/fs"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stats answers NodeGetVolumeStats for a volume published at path: the
// volume's directory must exist and be what path shows (a bind mount of it),
// and the usage is statfs of that directory's file system.
func (v *volumes) stats(id, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	src := v.path(id)
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist: it is not published on this node", id)
	} else if err != nil {
		return nil, status.Errorf(codes.Internal, "inspect volume directory %s: %v", src, err)
	}
	same, err := sameDir(src, path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !same) {
		return nil, status.Errorf(codes.NotFound, "volume %q is not published at volume_path %s", id, path)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "compare volume_path %s with %s: %v", path, src, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(src, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", src, err)
	}
	bsize := int64(st.Bsize) // int32 on some architectures
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Total:     int64(st.Blocks) * bsize,
			Available: int64(st.Bavail) * bsize,
			Used:      int64(st.Blocks-st.Bfree) * bsize,
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Total:     int64(st.Files),
			Available: int64(st.Ffree),
			Used:      int64(st.Files - st.Ffree),
		},
	}}, nil
}
