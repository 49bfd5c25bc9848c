package stubdriver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// Issue 18 item 7: NodeUnpublishVolume of a volume the driver never
// published leaves whatever is at the target alone: a regular file, an empty
// directory, somebody else's tmpfs, a symbolic link. Each is success (the CSI
// spec's answer for a volume that is not published there).
func TestUnpublishLeavesWhatItDidNotMount(t *testing.T) {
	needBindMounts(t) // and for the tmpfs: root
	f := newVolumeFixture(t)
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name  string
		plant func(t *testing.T, target string)
		check func(t *testing.T, target string)
	}{
		{"regular file", func(t *testing.T, target string) {
			if err := os.WriteFile(target, []byte("not the driver's"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, target string) {
			if b, err := os.ReadFile(target); err != nil || string(b) != "not the driver's" {
				t.Errorf("the regular file was touched: %q, %v", b, err)
			}
		}},
		{"empty directory", func(t *testing.T, target string) {
			if err := os.Mkdir(target, 0o750); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, target string) {
			if st, err := os.Lstat(target); err != nil || !st.IsDir() {
				t.Errorf("the empty directory was removed: %v", err)
			}
		}},
		{"someone else's tmpfs", func(t *testing.T, target string) {
			if err := os.Mkdir(target, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
			os.WriteFile(filepath.Join(target, "data"), []byte("theirs"), 0o644)
		}, func(t *testing.T, target string) {
			if n := len(mountsAt(t, target)); n != 1 {
				t.Errorf("the tmpfs at the target was unmounted: %d mounts there", n)
			}
			if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "theirs" {
				t.Errorf("the tmpfs's data: %q, %v", b, err)
			}
		}},
		{"symbolic link", func(t *testing.T, target string) {
			if err := os.Symlink(outside, target); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, target string) {
			if l, err := os.Readlink(target); err != nil || l != outside {
				t.Errorf("the symbolic link was removed or changed: %q, %v", l, err)
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
				t.Errorf("the link's target was touched: %q, %v", b, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := f.target(t, fmt.Sprintf("pod%d", i)) // no spaces: mountinfo escapes them
			tc.plant(t, target)
			_, err := f.node().NodeUnpublishVolume(bg, &csi.NodeUnpublishVolumeRequest{
				VolumeId: kubeletVolumeID("never-published"), TargetPath: target})
			wantCode(t, "NodeUnpublishVolume of a volume never published", err, codes.OK)
			tc.check(t, target)
		})
	}
}

// Issue 18 item 7: NodePublishVolume refuses a target that is not under the
// kubelet's pods directory once symbolic links and '..' are resolved, and one
// inside the state directory (whose volumes' data unpublish would delete).
// Nothing is created or mounted for a refused target.
func TestPublishRefusesTargetsOutsidePodsDir(t *testing.T) {
	needBindMounts(t)
	pods := t.TempDir()
	state := filepath.Join(pods, "state") // misconfigured on purpose: the state dir below the pods dir
	d := startDriver(t, stubdriver.Options{StateDir: state, KubeletPodsDir: pods})
	t.Cleanup(func() { unmountUnder(t, pods) })
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(pods, "uid"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(pods, "uid", "escape")); err != nil {
		t.Fatal(err)
	}
	// Another volume's data, which a publish at its directory would hide and
	// its unpublish would delete.
	other := filepath.Join(state, kubeletVolumeID("other"))
	if err := os.MkdirAll(other, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, target string }{
		{"outside", filepath.Join(outside, "mount")},
		{"'..' escape", filepath.Join(pods, "uid") + "/../../" + filepath.Base(outside) + "/mount"},
		{"symbolic link escape", filepath.Join(pods, "uid", "escape", "mount")},
		{"inside the state directory", other},
		{"the pods directory itself", pods},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.node().NodePublishVolume(bg, publishReq(kubeletVolumeID("refused"), tc.target, false))
			wantCode(t, "NodePublishVolume at "+tc.target, err, codes.InvalidArgument)
			if _, err := os.Lstat(filepath.Join(outside, "mount")); err == nil {
				t.Errorf("a refused publish created %s", filepath.Join(outside, "mount"))
			}
			if n := len(mountsAt(t, tc.target)); n != 0 {
				t.Errorf("a refused publish mounted at %s", tc.target)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(state, kubeletVolumeID("refused"))); err == nil {
		t.Error("a refused publish created the volume's directory")
	}
	// A symbolic link that stays inside the pods directory is followed.
	if err := os.Symlink(filepath.Join(pods, "uid"), filepath.Join(pods, "inside")); err != nil {
		t.Fatal(err)
	}
	id, target := kubeletVolumeID("ok"), filepath.Join(pods, "inside", "mount")
	if _, err := d.node().NodePublishVolume(bg, publishReq(id, target, false)); err != nil {
		t.Fatalf("publish through a link inside the pods directory: %v", err)
	}
	if n := len(mountsAt(t, filepath.Join(pods, "uid", "mount"))); n != 1 {
		t.Errorf("publish through a link: %d mounts at the resolved target, want 1", n)
	}
	if _, err := d.node().NodeUnpublishVolume(bg, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: filepath.Join(pods, "uid", "mount")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the other volume's data is gone: %v", err)
	}
}
