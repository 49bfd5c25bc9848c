package registrar

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// ParseEndpoint turns a CSI endpoint ("unix:///csi/csi.sock", "unix:/csi/csi.sock"
// or a plain path) into a file system path. Other schemes are refused.
func ParseEndpoint(endpoint string) (string, error) {
	p := endpoint
	if i := strings.Index(endpoint, "://"); i >= 0 {
		if endpoint[:i] != "unix" {
			return "", &ValidationError{What: "endpoint", Value: endpoint,
				Rule: "only unix sockets are supported", Fix: "use unix:///path/to/csi.sock or a plain path"}
		}
		p = endpoint[i+len("://"):]
	} else if rest, ok := strings.CutPrefix(endpoint, "unix:"); ok {
		p = rest
	}
	if p == "" || !strings.HasPrefix(p, "/") {
		return "", &ValidationError{What: "endpoint", Value: endpoint,
			Rule: "must name an absolute socket path", Fix: "use unix:///path/to/csi.sock or /path/to/csi.sock"}
	}
	if err := checkSocketPathLength("endpoint", p, "use a shorter socket path"); err != nil {
		return "", err
	}
	return p, nil
}

// ConflictError reports that a socket path is taken by something this process
// must not remove: a socket another live process serves, or a file that is not
// a socket. The path is left untouched.
type ConflictError struct {
	Path   string
	Reason string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("socket path %s is taken: %s; it was left untouched", e.Path, e.Reason)
}

// Socket is a listening unix socket this process created. Close removes the
// file only while the path still is that socket (same device and inode), so a
// socket that somebody else put at the path since is never deleted.
type Socket struct {
	path     string
	listener *net.UnixListener
	id       fileID
}

// fileID tells one file from another at the same path. Inode numbers are
// reused at once on some file systems, so the change time (set when the
// socket is created and chmod-ed) is part of the identity.
type fileID struct {
	dev, ino uint64
	ctime    syscall.Timespec
}

func idOf(st fs.FileInfo) (fileID, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(sys.Dev), ino: sys.Ino, ctime: sys.Ctim}, true
}

// staleDialTimeout bounds the connection attempt that tells a stale socket
// (connection refused) from a live one.
const staleDialTimeout = time.Second

// Listen creates a unix socket at path with mode 0600. An existing socket that
// refuses connections is stale and is removed first; a socket that answers, or
// any other kind of file, yields a *ConflictError and is not touched.
func Listen(path string) (*Socket, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// net.UnixListener would unlink the path on Close whatever is there by
	// then; Close below removes it only if it still is our socket.
	ln.SetUnlinkOnClose(false)
	s := &Socket{path: path, listener: ln}
	err = os.Chmod(path, 0o600)
	if err == nil {
		var st fs.FileInfo
		if st, err = os.Lstat(path); err == nil {
			s.id, _ = idOf(st)
		}
	}
	if err != nil {
		ln.Close()
		os.Remove(path) // just created by us; nobody can have replaced it usefully yet
		return nil, fmt.Errorf("set up socket %s: %w", path, err)
	}
	return s, nil
}

// Path returns the socket's file system path.
func (s *Socket) Path() string { return s.path }

// Listener returns the listener to serve on. Serving stops when the socket is closed.
func (s *Socket) Listener() net.Listener { return s.listener }

// Owned reports whether the path still is the socket this Socket created.
func (s *Socket) Owned() bool {
	st, err := os.Lstat(s.path)
	if err != nil || st.Mode().Type() != fs.ModeSocket {
		return false
	}
	id, ok := idOf(st)
	return ok && id == s.id
}

// Close stops listening and removes the socket file if it still is ours.
// It reports whether the file was removed.
func (s *Socket) Close() (removed bool) {
	s.listener.Close()
	return s.removeIfOwned()
}

func (s *Socket) removeIfOwned() bool {
	if !s.Owned() {
		return false
	}
	return os.Remove(s.path) == nil
}

// removeStale removes path if it is a socket nobody serves. It returns nil if
// the path is free afterwards and a *ConflictError if it must stay.
func removeStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	if st.Mode().Type() != fs.ModeSocket {
		return &ConflictError{Path: path,
			Reason: fmt.Sprintf("it is a %s, not a socket; remove or move it if it is not needed", fileKind(st.Mode()))}
	}
	conn, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		conn.Close()
		return &ConflictError{Path: path, Reason: "another live process serves it (is a second copy running?)"}
	}
	// A socket that refuses is stale. (A competitor that has bound but not
	// yet called listen also refuses; that window is a few instructions long,
	// and the kubelet could not have used that socket either.)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return &ConflictError{Path: path, Reason: fmt.Sprintf("cannot tell whether it is stale: %v", err)}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	}
	return "non-socket file"
}
