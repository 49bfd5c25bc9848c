package stubdriver

import (
	"fmt"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// bindMounter is the k8s.io/mount-utils mounter with Mount and Unmount done
// by system calls. mount-utils runs /bin/mount and /bin/umount for those two,
// and the driver's image is FROM scratch: it has no such binaries. The
// queries (IsMountPoint, List, GetMountRefs, and mount.CleanupMountPoint on
// top of them) are mount-utils' own code, which reads /proc/self/mountinfo.
//
// It implements mount.Interface itself and delegates the queries to method
// values of a mount.Mounter rather than embedding one: mount-utils'
// exec-based methods are then never referenced and stay out of the binary
// (about 120 KB). And the mount.Mounter is the zero one: mount.New would run
// umount once to probe its behaviour, in a temporary directory, neither of
// which works in a read-only, binary-less container.
type bindMounter struct {
	// mount-utils' queries, as method values of a zero *mount.Mounter. (A
	// field of type *mount.Mounter would make the linker keep all of its
	// methods, the exec-based ones too.)
	list                  func() ([]mount.MountPoint, error)
	isLikelyNotMountPoint func(string) (bool, error)
	isMountPoint          func(string) (bool, error)
	getMountRefs          func(string) ([]string, error)
}

var _ mount.Interface = (*bindMounter)(nil)

func newBindMounter() *bindMounter {
	sys := &mount.Mounter{}
	return &bindMounter{list: sys.List, isLikelyNotMountPoint: sys.IsLikelyNotMountPoint,
		isMountPoint: sys.IsMountPoint, getMountRefs: sys.GetMountRefs}
}

// List returns the mount table (mount-utils, /proc/mounts).
func (m *bindMounter) List() ([]mount.MountPoint, error) { return m.list() }

// IsLikelyNotMountPoint is mount-utils' heuristic; it misses bind mounts
// within one file system, so this package uses IsMountPoint.
func (m *bindMounter) IsLikelyNotMountPoint(file string) (bool, error) {
	return m.isLikelyNotMountPoint(file)
}

// IsMountPoint reports whether file is a mount point, bind mounts included.
func (m *bindMounter) IsMountPoint(file string) (bool, error) { return m.isMountPoint(file) }

// GetMountRefs returns the other mount points of what is mounted at, or
// contains, pathname.
func (m *bindMounter) GetMountRefs(pathname string) ([]string, error) {
	return m.getMountRefs(pathname)
}

// CanSafelySkipMountPointCheck is false: Unmount of a path that is not a
// mount point fails (EINVAL), so callers must check first.
func (m *bindMounter) CanSafelySkipMountPointCheck() bool { return false }

// remountFlags are the per-mount flags a read-only bind remount must keep:
// statfs reports them with the same bit values as mount(2) takes, and
// dropping a locked one (nosuid, nodev, noexec inside a user namespace) makes
// the remount fail with EPERM.
const remountFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
	unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME

// Mount bind-mounts source at target. The only options understood are "bind"
// (implied) and "ro"; anything else is an error rather than a silent no-op.
func (m *bindMounter) Mount(source, target, fstype string, options []string) error {
	readOnly := false
	for _, o := range options {
		switch o {
		case "bind":
		case "ro":
			readOnly = true
		default:
			return fmt.Errorf("bind mount %s at %s: option %q is not supported", source, target, o)
		}
	}
	return bindMount(source, target, readOnly)
}

// MountSensitive is Mount; bind mounts take no sensitive options.
func (m *bindMounter) MountSensitive(source, target, fstype string, options, sensitive []string) error {
	if len(sensitive) > 0 {
		return fmt.Errorf("bind mount %s at %s: sensitive options are not supported", source, target)
	}
	return m.Mount(source, target, fstype, options)
}

// MountSensitiveWithoutSystemd is Mount: no systemd is involved anyway.
func (m *bindMounter) MountSensitiveWithoutSystemd(source, target, fstype string, options, sensitive []string) error {
	return m.MountSensitive(source, target, fstype, options, sensitive)
}

// MountSensitiveWithoutSystemdWithMountFlags is Mount; extra flags are refused.
func (m *bindMounter) MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype string, options, sensitive, flags []string) error {
	if len(flags) > 0 {
		return fmt.Errorf("bind mount %s at %s: mount flags %q are not supported", source, target, flags)
	}
	return m.MountSensitive(source, target, fstype, options, sensitive)
}

// Unmount detaches the mount at target (one layer).
func (m *bindMounter) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// bindMount bind-mounts source at target, read-only if asked. A bind mount
// takes the read-only flag only on a second, remounting call; if that fails,
// the read-write mount is undone rather than left in place.
func bindMount(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", source, target, err)
	}
	if !readOnly {
		return nil
	}
	var st unix.Statfs_t
	err := unix.Statfs(target, &st)
	if err == nil {
		flags := uintptr(unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY) | uintptr(st.Flags)&remountFlags
		err = unix.Mount("", target, "", flags, "")
	}
	if err != nil {
		if uerr := unix.Unmount(target, 0); uerr != nil {
			return fmt.Errorf("make the bind mount at %s read-only: %w; undoing it failed too: %v", target, err, uerr)
		}
		return fmt.Errorf("make the bind mount at %s read-only: %w", target, err)
	}
	return nil
}

// isReadOnly reports whether the file system at path is mounted read-only.
func isReadOnly(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Flags&unix.ST_RDONLY != 0, nil
}
