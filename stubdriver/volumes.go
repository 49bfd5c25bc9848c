package stubdriver

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mount "k8s.io/mount-utils"
)

// EphemeralContextKey is the volume_context key the kubelet sets to "true" for
// a CSI ephemeral (inline) volume, when the CSIDriver has podInfoOnMount: true.
const EphemeralContextKey = "csi.storage.k8s.io/ephemeral"

// MaxVolumeIDLength is the longest volume ID the driver accepts: the CSI
// spec's limit for volume_id. The kubelet's ephemeral IDs are "csi-" and a
// SHA-256 in hex, 68 bytes.
const MaxVolumeIDLength = 128

// volumeDirMode is the mode of a volume's directory: writable by any user of
// the pod, as an emptyDir is. The state directory above it is 0750 (see
// stateDirMode), so nobody else on the host can reach it.
const volumeDirMode fs.FileMode = 0o777

// volumes keeps ephemeral volumes: one directory per volume ID under the state
// directory, bind-mounted at each target path the kubelet publishes it to.
// The mount table and the directories are the only state: a restarted driver
// finds what it published before, and a second instance on the node (a
// DaemonSet rolling with maxSurge, in the rolling-update mode) unpublishes
// what the first published. busy is per process: the kubelet runs one
// operation at a time on a volume, whichever instance it calls.
type volumes struct {
	dir     string // the state directory
	podsDir string // the kubelet's pods directory: targets must be below it
	mounter mount.Interface
	log     *slog.Logger

	mu   sync.Mutex
	busy map[string]bool // volume IDs with an operation in progress
}

func newVolumes(dir, podsDir string, log *slog.Logger) *volumes {
	return &volumes{dir: dir, podsDir: podsDir, mounter: newBindMounter(), log: log, busy: map[string]bool{}}
}

// stateDirMode is the mode of the state directory: only root may enter it,
// so the world-writable volume directories below are reachable through their
// pods only (as emptyDir volumes below /var/lib/kubelet/pods, mode 0750).
const stateDirMode fs.FileMode = 0o750

// stateDirFix is the advice of an error creating the state directory.
const stateDirFix = "run the driver as root, on a writable directory of the host (a hostPath volume)"

// init creates the state directory if needed and sets its mode: a hostPath
// volume of type DirectoryOrCreate makes it 0755.
func (v *volumes) init() error {
	if err := os.MkdirAll(v.dir, stateDirMode); err != nil {
		return &registrar.OptionError{Option: OptionStateDir, Value: v.dir, Op: "create", Err: err, Fix: stateDirFix}
	}
	if err := os.Chmod(v.dir, stateDirMode); err != nil {
		return &registrar.OptionError{Option: OptionStateDir, Value: v.dir, Op: "set the mode of", Err: err, Fix: stateDirFix}
	}
	return nil
}

// lock marks a volume ID busy. The kubelet does not run two operations on one
// volume at once; if some other CO does, the CSI spec's answer is ABORTED.
func (v *volumes) lock(id string) (unlock func(), err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.busy[id] {
		return nil, status.Errorf(codes.Aborted, "an operation on volume %q is in progress", id)
	}
	v.busy[id] = true
	return func() {
		v.mu.Lock()
		delete(v.busy, id)
		v.mu.Unlock()
	}, nil
}

// path returns the directory of a volume. The ID must have passed
// validVolumeID, so it is one path element.
func (v *volumes) path(id string) string { return filepath.Join(v.dir, id) }

// publish creates the volume's directory if needed and bind-mounts it at
// target. A target that already is this volume, mounted the same way, is
// success; a target with any other mount on it is ALREADY_EXISTS.
func (v *volumes) publish(id, target string, readOnly bool) error {
	src := v.path(id)
	mounted, err := v.mounter.IsMountPoint(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		mounted = false
	case err != nil:
		return status.Errorf(codes.Internal, "inspect target_path %s: %v", target, err)
	}
	if mounted {
		return v.checkPublished(id, src, target, readOnly)
	}

	created := false
	if err := os.Mkdir(src, volumeDirMode); err == nil {
		created = true
		// Mkdir applies the umask; the mode is meant as written.
		if err := os.Chmod(src, volumeDirMode); err != nil {
			return status.Errorf(codes.Internal, "create volume directory %s: %v", src, err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return status.Errorf(codes.Internal, "create volume directory %s: %v", src, err)
	}
	// The CO creates target_path's parent; the driver creates target_path.
	if err := os.MkdirAll(target, 0o750); err != nil {
		v.undoCreate(created, src)
		return status.Errorf(codes.Internal, "create target_path %s: %v", target, err)
	}
	opts := []string{"bind"}
	if readOnly {
		opts = append(opts, "ro")
	}
	if err := v.mounter.Mount(src, target, "", opts); err != nil {
		v.undoCreate(created, src)
		return status.Errorf(codes.Internal, "%v", err)
	}
	v.log.Info("volume published", "volumeID", id, "targetPath", target, "readOnly", readOnly, "outcome", "mounted")
	return nil
}

// checkPublished answers a publish whose target already is a mount point.
func (v *volumes) checkPublished(id, src, target string, readOnly bool) error {
	same, err := sameDir(src, target)
	if err != nil {
		return status.Errorf(codes.Internal, "compare %s with target_path %s: %v", src, target, err)
	}
	if !same {
		return status.Errorf(codes.AlreadyExists, "target_path %s already has another mount on it, not volume %q", target, id)
	}
	ro, err := isReadOnly(target)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if ro != readOnly {
		return status.Errorf(codes.AlreadyExists, "volume %q is already published at %s with readonly=%t, not readonly=%t",
			id, target, ro, readOnly)
	}
	v.log.Debug("volume already published", "volumeID", id, "targetPath", target, "outcome", "unchanged")
	return nil
}

// undoCreate removes a volume directory publish created before failing, so a
// failed publish leaves nothing behind: the kubelet does not call unpublish
// for a volume whose publish failed.
func (v *volumes) undoCreate(created bool, src string) {
	if !created {
		return
	}
	if err := os.Remove(src); err != nil {
		v.log.Warn("could not remove the directory of a failed publish", "path", src, "err", err)
	}
}

// unpublish undoes publish at target: it unmounts the mounts of this
// volume's directory at target and then removes target, and removes the
// volume's directory and its data (an ephemeral volume lives as long as its
// pod) unless it is still mounted elsewhere. Anything else at target (a
// file, a directory, a symbolic link, another mount) was not made by
// publish and is left alone. Nothing there is success: unpublish is
// idempotent.
func (v *volumes) unpublish(id, target string) error {
	src := v.path(id)
	at, err := v.unpublishTarget(target)
	if err != nil {
		return err
	}
	if at == "" {
		v.log.Info("nothing to unpublish: target_path is not where this driver publishes", "volumeID", id,
			"targetPath", target, "outcome", "untouched")
		return nil
	}
	if err := v.unmountOwn(id, src, at); err != nil {
		return err
	}
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		v.log.Debug("volume already unpublished", "volumeID", id, "targetPath", target, "outcome", "unchanged")
		return nil
	}
	// Never delete through a mount: if the volume directory is itself a mount
	// point or is still mounted somewhere, RemoveAll would empty what is
	// behind it. IsMountPoint covers the first case; the second is a
	// publish at another target the CO has not undone yet.
	if refs, err := v.mounter.GetMountRefs(src); err != nil {
		return status.Errorf(codes.Internal, "look for other mounts of %s: %v", src, err)
	} else if len(refs) > 0 {
		v.log.Info("volume unpublished; its directory stays, still mounted elsewhere", "volumeID", id,
			"targetPath", target, "mountedAt", refs, "outcome", "kept")
		return nil
	}
	if err := os.RemoveAll(src); err != nil {
		return status.Errorf(codes.Internal, "remove volume directory %s: %v", src, err)
	}
	v.log.Info("volume unpublished", "volumeID", id, "targetPath", target, "outcome", "removed")
	return nil
}

// unmountOwn unmounts, layer by layer, the mounts at target that show the
// volume's directory src, then removes target (an empty directory publish
// created). It stops at the first layer that is not this volume's: a
// foreign mount, a plain directory, a file or a symbolic link stay.
func (v *volumes) unmountOwn(id, src, target string) error {
	st, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "inspect target_path %s: %v", target, err)
	}
	if !st.IsDir() {
		v.log.Info("target_path is not a directory this driver mounted; left in place", "volumeID", id,
			"targetPath", target, "kind", st.Mode().Type().String(), "outcome", "untouched")
		return nil
	}
	unmounted := false
	for {
		mounted, err := v.mounter.IsMountPoint(target)
		if err != nil {
			return status.Errorf(codes.Internal, "inspect target_path %s: %v", target, err)
		}
		if !mounted {
			break
		}
		ours, err := sameDir(src, target)
		if err != nil {
			return status.Errorf(codes.Internal, "compare target_path %s with %s: %v", target, src, err)
		}
		if !ours {
			v.log.Info("target_path has a mount that is not this volume's; left in place", "volumeID", id,
				"targetPath", target, "outcome", "untouched")
			return nil
		}
		if err := v.mounter.Unmount(target); err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
		unmounted = true
	}
	if !unmounted {
		v.log.Info("target_path is not mounted by this driver; left in place", "volumeID", id,
			"targetPath", target, "outcome", "untouched")
		return nil
	}
	if err := os.Remove(target); err != nil {
		return status.Errorf(codes.Internal, "remove target_path %s after unmounting it: %v", target, err)
	}
	return nil
}

// sameDir reports whether a and b are the same directory (same device and
// inode): true for a bind mount's target and its source.
func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	ia, oka := sa.Sys().(*syscall.Stat_t)
	ib, okb := sb.Sys().(*syscall.Stat_t)
	return oka && okb && ia.Dev == ib.Dev && ia.Ino == ib.Ino, nil
}

// validVolumeID checks that a volume ID can name a directory of its own:
// 1-128 bytes of letters, digits, '.', '_' and '-', starting with a letter or
// digit (so never "." or ".."). The kubelet's ephemeral IDs always are.
func validVolumeID(id string) error {
	if len(id) > MaxVolumeIDLength {
		return fmt.Errorf("volume_id is %d bytes long, the limit is %d", len(id), MaxVolumeIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !csiplugin.IsAlnum(c) && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("volume_id %q has %q at position %d: use letters, digits, '.', '_' and '-', starting with a letter or digit", id, c, i)
		}
	}
	return nil
}
