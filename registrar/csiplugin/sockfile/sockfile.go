// Package sockfile creates the unix socket files csi-registrar serves and
// removes them again, so that no file this process did not create is ever
// removed or changed, whatever another process does at the same path.
//
// How (each rule with its reason):
//   - The directory is opened once; every later look-up, lock and unlink goes
//     through that directory descriptor (fstatat, unlinkat), so a symlink or
//     directory swapped in above the socket cannot redirect them.
//   - The socket is created with its mode: fchmod(0600) on the unbound socket
//     descriptor, then bind, which creates the file with that mode. There is
//     no chmod or chown by path afterwards (a path can be swapped for a
//     symlink between bind and chmod, and root would change the link's target).
//   - Identity is device + inode of the file bind created, taken from the
//     socket itself (ioctl SIOCUNIXFILE where the kernel has it, else an
//     O_PATH open of the name right after bind) and kept pinned by that open
//     descriptor, so the inode number cannot be reused while the Socket
//     lives. Metadata anyone may touch (mode, owner, xattrs, ctime) is not
//     part of it.
//   - A lock file beside the socket (".<name>.lock": the kubelet ignores names
//     starting with ".") is held with flock while the Socket lives. Two
//     processes using this package never both believe they own the path, and
//     a dead socket found while holding the lock can only be a dead owner's.
//   - A dead (stale) socket is removed by first renaming it to a name only this
//     process uses (".<name>.<pid>.stale"), checking that what was renamed is
//     the dead socket, and only then unlinking that private name; anything
//     else that was exchanged in is renamed back. So a file swapped in at the
//     path is never deleted.
//   - Our own socket is removed (Close) by fstatat + compare + unlinkat: the
//     kubelet must see an unlink at the name, not a rename. The residual
//     window is between fstatat and unlinkat (two system calls); only a
//     process that may rename files in the directory (root, in the kubelet's
//     directories) can use it, and it could delete the file itself anyway.
package sockfile

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"golang.org/x/sys/unix"
)

// Mode is the permission of the socket files: only the owner (root, like the
// kubelet) may connect.
const Mode = 0o600

// staleDialTimeout bounds the connection attempt that tells a stale socket
// (connection refused) from a live one.
const staleDialTimeout = time.Second

// listenBacklog is the listen(2) backlog; the kernel caps it at somaxconn.
const listenBacklog = 4096

// siocUnixFile is Linux's SIOCUNIXFILE (SIOCPROTOPRIVATE): it returns an
// O_PATH descriptor of the file a unix socket is bound to. Older kernels
// answer ENOTTY or EINVAL, and it needs CAP_NET_ADMIN (EPERM otherwise).
const siocUnixFile = 0x89E0

// Socket is a listening unix socket this process created. See the package
// comment for what it guarantees.
type Socket struct {
	path, dir, name string
	listener        *net.UnixListener
	dirfd           int              // O_PATH descriptor of dir
	pinfd           int              // O_PATH descriptor of the socket file: keeps its inode from reuse
	id              csiplugin.FileID // of the socket file
	lockfd          int              // flock-ed lock file, -1 when not held
	lockID          csiplugin.FileID

	closeOnce sync.Once
	removed   bool
}

// Listen creates a unix socket at path with mode 0600 and listens on it. A
// socket at the path that refuses connections is stale and is removed first;
// anything else at the path yields a *ListenError and is not touched.
func Listen(path string) (*Socket, error) {
	path = filepath.Clean(path)
	dir, name := filepath.Dir(path), filepath.Base(path)
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.EACCES) {
			return nil, createError(path, dir, "the socket", err)
		}
		return nil, missingDir(path, dir, err)
	}
	s := &Socket{path: path, dir: dir, name: name, dirfd: dirfd, pinfd: -1, lockfd: -1}
	ok := false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	if err := s.lock(); err != nil {
		return nil, err
	}
	if err := s.removeStale(); err != nil {
		return nil, err
	}
	if err := s.create(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// Path returns the socket's file system path.
func (s *Socket) Path() string { return s.path }

// Listener returns the listener to serve on. Closing it does not remove the
// file; Close does.
func (s *Socket) Listener() net.Listener { return s.listener }

// Owned reports whether the path still is the socket this Socket created
// (same device and inode). Changing its mode, owner or xattrs does not
// change that.
func (s *Socket) Owned() bool { return s.is(s.name, s.id, unix.S_IFSOCK) }

// Close stops listening, removes the socket file if it still is ours, and
// releases the lock. It reports whether the file was removed. Calling it
// again returns the first result.
func (s *Socket) Close() (removed bool) {
	s.closeOnce.Do(func() {
		s.listener.Close()
		if s.Owned() {
			// Unlink the name, never rename it aside (the kubelet acts only on
			// Create and Remove). Residual window: between the fstatat in Owned
			// and this unlinkat; docs/design.md gives its threat model.
			s.removed = unix.Unlinkat(s.dirfd, s.name, 0) == nil
		}
		s.release()
	})
	return s.removed
}

// is reports whether name in the directory is the file id, of type typ.
func (s *Socket) is(name string, id csiplugin.FileID, typ uint32) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(s.dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == typ && csiplugin.FileIDOfStat(&st) == id
}

// lockName is the lock file's name: hidden from the kubelet's plugin watcher,
// which ignores names starting with ".".
func (s *Socket) lockName() string { return "." + s.name + ".lock" }

// lock takes the lock file beside the socket, creating it if needed.
func (s *Socket) lock() error {
	name := s.lockName()
	for range 5 {
		fd, err := unix.Openat(s.dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, Mode)
		if errors.Is(err, syscall.ELOOP) {
			return &ListenError{Path: s.path, Kind: KindOther, Err: err,
				Reason: fmt.Sprintf("its lock file %s is a symbolic link", filepath.Join(s.dir, name)),
				Fix:    "remove the symbolic link; the lock file is created by this program"}
		}
		if err != nil {
			return createError(s.path, s.dir, "the lock file "+name, err)
		}
		if err := s.flock(fd); err != nil {
			unix.Close(fd)
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return inUse(s.path, fmt.Sprintf("another process holds its lock file %s: it serves or is creating this socket",
					filepath.Join(s.dir, name)))
			}
			return &ListenError{Path: s.path, Kind: KindOther, Err: err,
				Reason: "locking " + filepath.Join(s.dir, name) + " failed", Fix: "see the system error"}
		}
		// The previous holder may have removed the file between our open and
		// flock: then we hold a lock nobody else can see. Check the name
		// still is the file we locked.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && s.is(name, csiplugin.FileIDOfStat(&st), unix.S_IFREG) {
			s.lockfd, s.lockID = fd, csiplugin.FileIDOfStat(&st)
			return nil
		}
		unix.Close(fd)
	}
	return inUse(s.path, "its lock file keeps being replaced by another process")
}

// releaseWait bounds how long lock waits for a lock held while no file is
// at the socket's path, polled every releasePoll: its holder is between
// Close's unlink and its release, or between its lock and its bind (a
// listener woken by the path's Remove event meets the first); either ends
// within microseconds.
const (
	releaseWait = 100 * time.Millisecond
	releasePoll = 2 * time.Millisecond
)

// flock takes the lock on fd without blocking; while another process holds
// it and no file is at the socket's path, it tries again for up to
// releaseWait.
func (s *Socket) flock(fd int) error {
	deadline := time.Now().Add(releaseWait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		var st unix.Stat_t
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) ||
			unix.Fstatat(s.dirfd, s.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return err
		}
		time.Sleep(releasePoll)
	}
}

// release removes the lock file if it still is ours, and closes the
// descriptors. The lock file is unlinked while it is still locked, so the
// next process creates a fresh one (lock checks the name after flock).
func (s *Socket) release() {
	if s.lockfd >= 0 {
		if s.is(s.lockName(), s.lockID, unix.S_IFREG) {
			unix.Unlinkat(s.dirfd, s.lockName(), 0)
		}
		unix.Close(s.lockfd)
		s.lockfd = -1
	}
	if s.pinfd >= 0 {
		unix.Close(s.pinfd)
		s.pinfd = -1
	}
	if s.dirfd >= 0 {
		unix.Close(s.dirfd)
		s.dirfd = -1
	}
}

// removeStale removes a socket at the path that refuses connections. It
// returns nil if the path is free afterwards and a *ListenError if something
// must stay.
func (s *Socket) removeStale() error {
	var st unix.Stat_t
	err := unix.Fstatat(s.dirfd, s.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return &ListenError{Path: s.path, Kind: KindOther, Err: err, Reason: "inspecting it failed", Fix: "see the system error"}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return notSocket(s.path, modeType(st.Mode))
	}
	found := csiplugin.FileIDOfStat(&st)
	conn, err := net.DialTimeout("unix", s.path, staleDialTimeout)
	if err == nil {
		conn.Close()
		return inUse(s.path, "another live process serves a socket there")
	}
	// A socket that refuses is stale. (A process that has bound but not yet
	// called listen also refuses; one that uses this package holds the lock
	// then, and the kubelet could not have used such a socket either.)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return &ListenError{Path: s.path, Kind: KindOther, Err: err,
			Reason: "there is a socket, and connecting to it neither succeeded nor was refused, so it is not known to be stale",
			Fix:    "check which process serves it (ss -xlp)"}
	}
	return s.removeDead(found)
}

// removeDead removes the dead socket found at the path, through a private
// name: see the package comment.
func (s *Socket) removeDead(found csiplugin.FileID) error {
	private := fmt.Sprintf(".%s.%d.stale", s.name, os.Getpid())
	err := unix.Renameat2(s.dirfd, s.name, s.dirfd, private, unix.RENAME_NOREPLACE)
	if errors.Is(err, syscall.EINVAL) { // a file system without RENAME_NOREPLACE; the private name is ours
		err = unix.Renameat(s.dirfd, s.name, s.dirfd, private)
	}
	if errors.Is(err, syscall.ENOENT) {
		return nil // gone already
	}
	if err != nil {
		return &ListenError{Path: s.path, Kind: KindOther, Err: err, Reason: "moving its stale socket aside failed", Fix: "see the system error"}
	}
	if s.is(private, found, unix.S_IFSOCK) {
		if err := unix.Unlinkat(s.dirfd, private, 0); err != nil {
			return &ListenError{Path: s.path, Kind: KindOther, Err: err,
				Reason: "removing its stale socket (moved to " + private + ") failed", Fix: "see the system error"}
		}
		return nil
	}
	// Another file was put at the path after the check: put it back.
	err = unix.Renameat2(s.dirfd, private, s.dirfd, s.name, unix.RENAME_NOREPLACE)
	if errors.Is(err, syscall.EINVAL) {
		if err = unix.Linkat(s.dirfd, private, s.dirfd, s.name, 0); err == nil {
			err = unix.Unlinkat(s.dirfd, private, 0)
		}
	}
	if err != nil {
		return &ListenError{Path: s.path, Kind: KindOther, Err: err,
			Reason: fmt.Sprintf("a file put there while its stale socket was being removed was moved to %s and could not be moved back",
				filepath.Join(s.dir, private)),
			Fix: "move it back by hand"}
	}
	return inUse(s.path, "another process replaced its stale socket while it was being removed")
}

// create makes the socket: mode first, then bind, then identity, then listen.
func (s *Socket) create() error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &ListenError{Path: s.path, Kind: KindOther, Err: err, Reason: "creating a socket failed", Fix: "see the system error"}
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	// bind creates the file with the socket inode's mode (minus the umask):
	// set it here, on the descriptor, never on the path afterwards.
	if err := unix.Fchmod(fd, Mode); err != nil {
		return &ListenError{Path: s.path, Kind: KindOther, Err: err, Reason: "setting the socket's mode failed", Fix: "see the system error"}
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: s.path}); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			var st unix.Stat_t
			if unix.Fstatat(s.dirfd, s.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
				return notSocket(s.path, modeType(st.Mode))
			}
			return inUse(s.path, "another process created a socket there just now")
		}
		return createError(s.path, s.dir, "the socket", err)
	}
	// Listen at once: the kubelet dials as soon as it sees the file.
	if err := unix.Listen(fd, listenBacklog); err != nil {
		if s.pin(fd) == nil {
			s.removeOwn()
		}
		return &ListenError{Path: s.path, Kind: KindOther, Err: err, Reason: "listen failed", Fix: "see the system error"}
	}
	if err := s.pin(fd); err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), s.path)
	ln, err := net.FileListener(f) // dups fd
	f.Close()
	ok = true // f.Close closed fd
	if err != nil {
		s.removeOwn()
		return &ListenError{Path: s.path, Kind: KindOther, Err: err, Reason: "wrapping the socket failed", Fix: "see the system error"}
	}
	s.listener = ln.(*net.UnixListener)
	s.listener.SetUnlinkOnClose(false) // Close decides, by identity
	return nil
}

// pin records the identity of the file bind just created and keeps an
// O_PATH descriptor of it.
func (s *Socket) pin(fd int) error {
	pinfd, err := unix.IoctlRetInt(fd, siocUnixFile)
	if err != nil {
		// Fallback: open the name. Residual window between bind and this
		// open; the checks below refuse anything but a socket of our uid.
		pinfd, err = unix.Openat(s.dirfd, s.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return inUse(s.path, "the socket was removed or replaced right after it was created")
		}
	}
	s.pinfd = pinfd
	var st unix.Stat_t
	if err := unix.Fstat(pinfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
		return inUse(s.path, "the socket was replaced right after it was created")
	}
	s.id = csiplugin.FileIDOfStat(&st)
	if !s.Owned() {
		return inUse(s.path, "the socket was replaced right after it was created")
	}
	return nil
}

// removeOwn removes the socket file if it still is ours.
func (s *Socket) removeOwn() bool {
	return s.Owned() && unix.Unlinkat(s.dirfd, s.name, 0) == nil
}

// modeType converts the type bits of a stat mode to an fs.FileMode.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
