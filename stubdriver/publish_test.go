package stubdriver_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	mount "k8s.io/mount-utils"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// kubeletVolumeID returns a volume ID of the kubelet's form for an ephemeral
// volume: "csi-" and a SHA-256 in hex.
func kubeletVolumeID(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return "csi-" + hex.EncodeToString(sum[:])
}

var (
	mountCap = &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	ephemeralContext = map[string]string{
		stubdriver.EphemeralContextKey:     "true",
		"csi.storage.k8s.io/pod.name":      "writer",
		"csi.storage.k8s.io/pod.uid":       "0d8c4c6e-5b8f-4a53-9a0e-1f2a3b4c5d6e",
		"csi.storage.k8s.io/pod.namespace": "default",
	}
)

// publishReq is the NodePublishVolume the kubelet sends for an inline volume.
func publishReq(id, target string, readOnly bool) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: mountCap,
		Readonly: readOnly, VolumeContext: ephemeralContext}
}

// volumeFixture is a driver with a state directory, and a directory standing
// in for /var/lib/kubelet/pods.
type volumeFixture struct {
	*running
	state string // Options.StateDir
	pods  string // parent of the target paths
}

func newVolumeFixture(t *testing.T) *volumeFixture {
	t.Helper()
	f := &volumeFixture{state: filepath.Join(t.TempDir(), "state"), pods: t.TempDir()}
	// Registered after the temporary directories: runs before they are
	// removed, so that a failed test never deletes through a mount.
	t.Cleanup(func() { unmountUnder(t, f.pods) })
	f.running = startDriver(t, stubdriver.Options{StateDir: f.state, KubeletPodsDir: f.pods})
	return f
}

// target returns a kubelet-like target path whose parent exists and which
// does not: <pods>/<name>/mount.
func (f *volumeFixture) target(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(f.pods, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "mount")
}

// mountsAt returns the mount table's entries whose mount point is path.
func mountsAt(t *testing.T, path string) []mount.MountInfo {
	t.Helper()
	mis, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var at []mount.MountInfo
	for _, mi := range mis {
		if mi.MountPoint == path {
			at = append(at, mi)
		}
	}
	return at
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	mis, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	var under []string
	for _, mi := range mis {
		if mi.MountPoint == dir || strings.HasPrefix(mi.MountPoint, dir+"/") {
			under = append(under, mi.MountPoint)
		}
	}
	slices.SortFunc(under, func(a, b string) int { return len(b) - len(a) })
	for _, p := range under {
		t.Errorf("left mounted: %s (unmounting it)", p)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", p, err)
		}
	}
}

// needBindMounts skips the test unless this process can make bind mounts:
// root, with CAP_SYS_ADMIN in its mount namespace. CI runs the tests as root.
func needBindMounts(t *testing.T) {
	t.Helper()
	const how = "run the tests as root, e.g. sudo go test ./stubdriver -run Publish (CI does)"
	if os.Geteuid() != 0 {
		t.Skipf("SKIPPED: this test makes real bind mounts, which needs root; %s", how)
	}
	src, dst := t.TempDir(), t.TempDir()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("SKIPPED: this test makes real bind mounts, and a test bind mount failed (%v): no CAP_SYS_ADMIN here; %s", err, how)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatal(err)
	}
}

func sameInode(t *testing.T, a, b string) bool {
	t.Helper()
	sa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	ia, ib := sa.Sys().(*syscall.Stat_t), sb.Sys().(*syscall.Stat_t)
	return ia.Dev == ib.Dev && ia.Ino == ib.Ino
}

// TestPublishErrors checks the error of every malformed or unservable
// NodePublishVolume, and that none of them leaves anything behind. No mount
// is made: it runs without root.
func TestPublishErrors(t *testing.T) {
	f := newVolumeFixture(t)
	noState := startDriver(t, stubdriver.Options{})
	id := kubeletVolumeID("errors")
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: mountCap.AccessMode,
	}
	noAccessType := &csi.VolumeCapability{AccessMode: mountCap.AccessMode}
	with := func(mod func(r *csi.NodePublishVolumeRequest)) *csi.NodePublishVolumeRequest {
		r := publishReq(id, f.target(t, "pod"), false)
		mod(r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		want codes.Code
		node csi.NodeClient // default: the driver with a state directory
	}{
		{name: "no volume_id", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeId = "" }), want: codes.InvalidArgument},
		{name: "no target_path", req: with(func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "" }), want: codes.InvalidArgument},
		{name: "no volume_capability", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability = nil }), want: codes.InvalidArgument},
		{name: "no access type", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability = noAccessType }), want: codes.InvalidArgument},
		{name: "relative target_path", req: with(func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "pods/x/mount" }), want: codes.InvalidArgument},
		{name: "block access type", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability = block }), want: codes.FailedPrecondition},
		{name: "no volume_context", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeContext = nil }), want: codes.NotFound},
		{name: "not ephemeral", req: with(func(r *csi.NodePublishVolumeRequest) {
			r.VolumeContext = map[string]string{stubdriver.EphemeralContextKey: "false"}
		}), want: codes.NotFound},
		{name: "ephemeral not exactly true", req: with(func(r *csi.NodePublishVolumeRequest) {
			r.VolumeContext = map[string]string{stubdriver.EphemeralContextKey: "True"}
		}), want: codes.NotFound},
		{name: "volume_id with a slash", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeId = "../escape" }), want: codes.InvalidArgument},
		{name: "volume_id ..", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeId = ".." }), want: codes.InvalidArgument},
		{name: "volume_id over 128 bytes", req: with(func(r *csi.NodePublishVolumeRequest) { r.VolumeId = strings.Repeat("v", 129) }),
			want: codes.InvalidArgument},
		{name: "driver without a state directory", req: publishReq(id, f.target(t, "pod"), false), want: codes.FailedPrecondition,
			node: noState.node()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = f.node()
			}
			rsp, err := node.NodePublishVolume(bg, tc.req)
			wantCode(t, "NodePublishVolume", err, tc.want)
			if rsp != nil {
				t.Errorf("response %v with an error", rsp)
			}
			if entries, err := os.ReadDir(f.state); err != nil || len(entries) != 0 {
				t.Errorf("state directory after a refused publish: %v, %v; want it empty", entries, err)
			}
			if target := tc.req.GetTargetPath(); filepath.IsAbs(target) {
				if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("target_path %s exists after a refused publish (%v)", target, err)
				}
			}
		})
	}
}

// TestUnpublishErrors checks NodeUnpublishVolume's answers where no mount is
// involved: missing arguments, and the idempotent cases (nothing there).
func TestUnpublishErrors(t *testing.T) {
	f := newVolumeFixture(t)
	id := kubeletVolumeID("unpublish")
	emptyTarget := f.target(t, "empty")
	if err := os.Mkdir(emptyTarget, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *csi.NodeUnpublishVolumeRequest
		want codes.Code
	}{
		{"no volume_id", &csi.NodeUnpublishVolumeRequest{TargetPath: f.target(t, "pod")}, codes.InvalidArgument},
		{"no target_path", &csi.NodeUnpublishVolumeRequest{VolumeId: id}, codes.InvalidArgument},
		{"relative target_path", &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: "pods/x/mount"}, codes.InvalidArgument},
		{"unknown volume, no target", &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: f.target(t, "pod")}, codes.OK},
		{"unknown volume, empty target directory", &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: emptyTarget}, codes.OK},
		{"volume_id that cannot be ours", &csi.NodeUnpublishVolumeRequest{VolumeId: "../x", TargetPath: f.target(t, "pod")}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.node().NodeUnpublishVolume(bg, tc.req)
			wantCode(t, "NodeUnpublishVolume", err, tc.want)
		})
	}
	if st, err := os.Lstat(emptyTarget); err != nil || !st.IsDir() {
		t.Errorf("the empty target directory, which the driver did not create, was removed: %v", err)
	}
}

// step is one call in a TestPublishIdempotency sequence.
type step struct {
	op       string // "publish" or "unpublish"
	vol      string // volume name, turned into a kubelet-like ID
	target   string // target name under the fixture's pods directory
	readOnly bool
	mode     csi.VolumeCapability_AccessMode_Mode // default SINGLE_NODE_WRITER
	want     codes.Code
	// After a successful step: whether the volume directory still exists.
	// Checked after unpublish only.
	volumeKept bool
}

// TestPublishIdempotency runs sequences of publish and unpublish calls with
// real bind mounts and checks, after every step, the mount table, the target,
// the volume directory and the read-only state; and at the end that nothing
// is left: no mount, no volume directory.
func TestPublishIdempotency(t *testing.T) {
	needBindMounts(t)
	readerOnly := csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"publish twice", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "publish", vol: "a", target: "t1"},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"publish read-only twice", []step{
			{op: "publish", vol: "a", target: "t1", readOnly: true},
			{op: "publish", vol: "a", target: "t1", readOnly: true},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"read-write, then read-only at the same target", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "publish", vol: "a", target: "t1", readOnly: true, want: codes.AlreadyExists},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"read-only, then read-write at the same target", []step{
			{op: "publish", vol: "a", target: "t1", readOnly: true},
			{op: "publish", vol: "a", target: "t1", want: codes.AlreadyExists},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"reader-only access mode mounts read-only", []step{
			{op: "publish", vol: "a", target: "t1", mode: readerOnly},
			{op: "publish", vol: "a", target: "t1", readOnly: true},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"another volume at a published target", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "publish", vol: "b", target: "t1", want: codes.AlreadyExists},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"unpublish twice", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "unpublish", vol: "a", target: "t1"},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"unpublish a volume never published", []step{
			{op: "unpublish", vol: "never", target: "t1"},
		}},
		{"publish again after unpublish", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "unpublish", vol: "a", target: "t1"},
			{op: "publish", vol: "a", target: "t1"},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
		{"one volume at two targets", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "publish", vol: "a", target: "t2"},
			{op: "unpublish", vol: "a", target: "t1", volumeKept: true},
			{op: "unpublish", vol: "a", target: "t2"},
		}},
		{"two volumes", []step{
			{op: "publish", vol: "a", target: "t1"},
			{op: "publish", vol: "b", target: "t2"},
			{op: "unpublish", vol: "b", target: "t2"},
			{op: "unpublish", vol: "a", target: "t1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newVolumeFixture(t)
			for i, s := range tc.steps {
				id, target := kubeletVolumeID(s.vol), f.target(t, s.target)
				what := fmt.Sprintf("step %d: %s %s at %s", i+1, s.op, s.vol, s.target)
				var err error
				switch s.op {
				case "publish":
					req := publishReq(id, target, s.readOnly)
					if s.mode != 0 {
						req.VolumeCapability = &csi.VolumeCapability{AccessType: mountCap.AccessType,
							AccessMode: &csi.VolumeCapability_AccessMode{Mode: s.mode}}
					}
					_, err = f.node().NodePublishVolume(bg, req)
				case "unpublish":
					_, err = f.node().NodeUnpublishVolume(bg, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
				}
				wantCode(t, what, err, s.want)
				if t.Failed() {
					t.FailNow()
				}
				if s.want == codes.OK {
					f.check(t, what, s, id, target)
				}
			}
			// Everything was unpublished: no mount, no volume directory.
			if entries, err := os.ReadDir(f.state); err != nil || len(entries) != 0 {
				t.Errorf("state directory at the end: %v, %v; want it empty", entries, err)
			}
		})
	}
}

// check verifies the state after a successful step.
func (f *volumeFixture) check(t *testing.T, what string, s step, id, target string) {
	t.Helper()
	vol := filepath.Join(f.state, id)
	switch s.op {
	case "publish":
		if n := len(mountsAt(t, target)); n != 1 {
			t.Fatalf("%s: %d mounts at the target, want exactly 1", what, n)
		}
		if !sameInode(t, target, vol) {
			t.Fatalf("%s: the target is not the volume directory %s", what, vol)
		}
		if st, err := os.Stat(vol); err != nil || st.Mode().Perm() != 0o777 {
			t.Errorf("%s: volume directory %v, %v; want mode 0777", what, st.Mode(), err)
		}
		wantRO := s.readOnly || s.mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
		file := filepath.Join(target, "written-through-the-mount")
		err := os.WriteFile(file, []byte(what), 0o644)
		switch {
		case wantRO && !errors.Is(err, syscall.EROFS):
			t.Errorf("%s: writing to a read-only volume: %v, want EROFS", what, err)
		case !wantRO && err != nil:
			t.Errorf("%s: writing to the volume: %v", what, err)
		case !wantRO:
			// The data lives in the state directory.
			if b, err := os.ReadFile(filepath.Join(vol, "written-through-the-mount")); err != nil || string(b) != what {
				t.Errorf("%s: the file written at the target is not in %s: %q, %v", what, vol, b, err)
			}
		}
	case "unpublish":
		if n := len(mountsAt(t, target)); n != 0 {
			t.Fatalf("%s: %d mounts left at the target", what, n)
		}
		if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: target still there (%v); the driver must remove what it created", what, err)
		}
		_, err := os.Lstat(vol)
		if kept := err == nil; kept != s.volumeKept {
			t.Errorf("%s: volume directory kept = %v (%v), want %v", what, kept, err, s.volumeKept)
		}
	}
}

// TestPublishForeignMount: a target with somebody else's mount on it is
// ALREADY_EXISTS, and that mount is left alone.
func TestPublishForeignMount(t *testing.T) {
	needBindMounts(t)
	f := newVolumeFixture(t)
	target := f.target(t, "pod")
	other := t.TempDir()
	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(other, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(target, 0)
	_, err := f.node().NodePublishVolume(bg, publishReq(kubeletVolumeID("foreign"), target, false))
	wantCode(t, "NodePublishVolume over a foreign mount", err, codes.AlreadyExists)
	if n := len(mountsAt(t, target)); n != 1 || !sameInode(t, target, other) {
		t.Errorf("the foreign mount changed: %d mounts at the target", n)
	}
}

// TestPublishSurvivesRestart: the mount table and the state directory are the
// driver's only state, so a restarted driver answers a repeated publish with
// success and unpublishes what its predecessor published.
func TestPublishSurvivesRestart(t *testing.T) {
	needBindMounts(t)
	f := newVolumeFixture(t)
	id, target := kubeletVolumeID("restart"), f.target(t, "pod")
	if _, err := f.node().NodePublishVolume(bg, publishReq(id, target, false)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.conn.Close()
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsAt(t, target)); n != 1 {
		t.Fatalf("stopping the driver changed the mounts: %d at the target, want 1", n)
	}

	again := startDriver(t, stubdriver.Options{StateDir: f.state, KubeletPodsDir: f.pods})
	if _, err := again.node().NodePublishVolume(bg, publishReq(id, target, false)); err != nil {
		t.Fatalf("publish again after a restart: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "kept" {
		t.Errorf("data after a restart: %q, %v", b, err)
	}
	if _, err := again.node().NodeUnpublishVolume(bg, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsAt(t, target)); n != 0 {
		t.Errorf("%d mounts left at the target", n)
	}
	if _, err := os.Lstat(filepath.Join(f.state, id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume directory left: %v", err)
	}
}

// TestStateDirMode: Run creates the state directory, or tightens the one a
// hostPath of type DirectoryOrCreate made (0755), to 0750: the volumes in it
// are world-writable and must be reachable through their pods only.
func TestStateDirMode(t *testing.T) {
	for _, existing := range []bool{false, true} {
		state := filepath.Join(t.TempDir(), "state")
		if existing {
			if err := os.Mkdir(state, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(state, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		startDriver(t, stubdriver.Options{StateDir: state})
		if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o750 {
			t.Errorf("state directory (existed before: %v): %v, %v; want mode 0750", existing, st.Mode(), err)
		}
	}
}
