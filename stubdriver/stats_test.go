package stubdriver_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestVolumeStats: a published inline volume's NodeGetVolumeStats is statfs
// of its directory's file system (bytes and inodes), and the driver
// advertises GET_VOLUME_STATS, so that the kubelet asks; a file written into
// the volume shows in the inodes used. Asked at a path where the volume is
// not published, or after unpublish, the answer is NOT_FOUND.
func TestVolumeStats(t *testing.T) {
	needBindMounts(t)
	f := newVolumeFixture(t)
	caps, err := f.node().NodeGetCapabilities(bg, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, c := range caps.GetCapabilities() {
		advertised = advertised || c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_GET_VOLUME_STATS
	}
	if !advertised {
		t.Errorf("NodeGetCapabilities = %v: GET_VOLUME_STATS missing, so the kubelet never asks for volume stats", caps.GetCapabilities())
	}

	id, target := kubeletVolumeID("stats"), f.target(t, "pod")
	if _, err := f.node().NodePublishVolume(bg, publishReq(id, target, false)); err != nil {
		t.Fatal(err)
	}
	ask := func() *csi.NodeGetVolumeStatsResponse {
		t.Helper()
		rsp, err := f.node().NodeGetVolumeStats(bg, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
		if err != nil {
			t.Fatalf("NodeGetVolumeStats of a published volume: %v", err)
		}
		return rsp
	}
	usage := func(rsp *csi.NodeGetVolumeStatsResponse, unit csi.VolumeUsage_Unit) *csi.VolumeUsage {
		t.Helper()
		for _, u := range rsp.GetUsage() {
			if u.GetUnit() == unit {
				return u
			}
		}
		t.Fatalf("NodeGetVolumeStats = %v: no usage in %v", rsp, unit)
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(f.state, id), &st); err != nil {
		t.Fatal(err)
	}
	before := ask()
	bytes, inodes := usage(before, csi.VolumeUsage_BYTES), usage(before, csi.VolumeUsage_INODES)
	if want := int64(st.Blocks) * int64(st.Bsize); bytes.GetTotal() != want {
		t.Errorf("bytes total %d, want statfs's %d", bytes.GetTotal(), want)
	}
	if bytes.GetUsed() < 0 || bytes.GetAvailable() < 0 || bytes.GetUsed()+bytes.GetAvailable() > bytes.GetTotal() {
		t.Errorf("bytes: used %d + available %d against total %d", bytes.GetUsed(), bytes.GetAvailable(), bytes.GetTotal())
	}
	if inodes.GetTotal() != int64(st.Files) {
		t.Errorf("inodes total %d, want statfs's %d", inodes.GetTotal(), st.Files)
	}
	// A file system without inode accounting (total 0) cannot show one more.
	if inodes.GetTotal() > 0 {
		for i := range 10 {
			if err := os.WriteFile(filepath.Join(target, "f"+string(rune('0'+i))), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Others write to the same file system meanwhile: at least what we wrote.
		if after := usage(ask(), csi.VolumeUsage_INODES); after.GetUsed() < inodes.GetUsed()+1 {
			t.Errorf("inodes used %d after 10 files were written into the volume, was %d", after.GetUsed(), inodes.GetUsed())
		}
	}

	elsewhere := f.target(t, "other")
	if err := os.MkdirAll(elsewhere, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*csi.NodeGetVolumeStatsRequest{
		"not published at that path": {VolumeId: id, VolumePath: elsewhere},
		"no such path":               {VolumeId: id, VolumePath: filepath.Join(f.pods, "nowhere")},
		"never published":            {VolumeId: kubeletVolumeID("never"), VolumePath: target},
		"relative path":              {VolumeId: id, VolumePath: "pod/mount"},
	} {
		if _, err := f.node().NodeGetVolumeStats(bg, req); status.Code(err) != codes.NotFound {
			t.Errorf("%s: NodeGetVolumeStats = %v, want NOT_FOUND", name, err)
		}
	}
	if _, err := f.node().NodeUnpublishVolume(bg, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.node().NodeGetVolumeStats(bg, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}); status.Code(err) != codes.NotFound {
		t.Errorf("after unpublish: NodeGetVolumeStats = %v, want NOT_FOUND", err)
	}
	for name, req := range map[string]*csi.NodeGetVolumeStatsRequest{
		"no volume_id":   {VolumePath: target},
		"no volume_path": {VolumeId: id},
	} {
		if _, err := f.node().NodeGetVolumeStats(bg, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: NodeGetVolumeStats = %v, want INVALID_ARGUMENT", name, err)
		}
	}
}
