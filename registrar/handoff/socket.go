package handoff

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// ErrLive means a process listens on the registration socket's path and
// did not hand it over: node-driver-registrar, or a registrar without the
// handover. Its socket is left alone.
var ErrLive = errors.New("another process serves the registration socket")

// ErrNotSocket means the path holds a file that is not a socket; it is
// left alone.
var ErrNotSocket = errors.New("not a socket")

// Socket is a listening unix socket and the identity of its file: a
// socket's descriptor does not name its file (fstat(2) describes the
// socket, not the path), so the identity is read when the file is created
// and carried with the descriptor from process to process.
type Socket struct {
	*net.UnixListener
	ID FileID
}

// FileID is a file's device and inode.
type FileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func fileID(path string) (FileID, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return FileID{}, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	return FileID{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// Bind returns a listening unix socket at path that closing never unlinks
// (the descriptor outlives this process in the next one), reporting whether
// a dead socket was replaced. The path may be free, or hold a socket nobody
// accepts on (connect(2) refused: left by a crash or a reboot), which is
// replaced by rename(2) of a socket bound at a hidden name, so the path is
// never missing. A live socket gives ErrLive, another file ErrNotSocket;
// neither is touched.
//
// network is "unix" for the registration socket and "unixpacket" for the
// rendezvous.
func Bind(network, path string) (s *Socket, replaced bool, err error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s, err = listen(network, path)
		return s, false, err
	case err != nil:
		return nil, false, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, false, fmt.Errorf("%s: %w (%s)", path, ErrNotSocket, fi.Mode().Type())
	}
	if Alive(network, path) {
		return nil, false, fmt.Errorf("%s: %w", path, ErrLive)
	}
	s, err = BindOver(network, path)
	if err != nil {
		return nil, false, fmt.Errorf("replace the dead socket %s: %w", path, err)
	}
	return s, true, nil
}

// listen binds path and reads its identity.
func listen(network, path string) (*Socket, error) {
	l, err := net.ListenUnix(network, &net.UnixAddr{Name: path, Net: network})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	id, err := fileID(path)
	if err != nil {
		l.Close()
		return nil, err
	}
	return &Socket{UnixListener: l, ID: id}, nil
}

// Alive reports whether a process accepts connections on the socket at
// path. Only a refused connection (or no socket) counts as dead: a
// listener whose backlog is full is alive.
func Alive(network, path string) bool {
	c, err := net.Dial(network, path)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOENT)
}

// Owns reports whether path names the socket s listens on (the device and
// inode it was created with): the proof that a file at the path is the
// caller's to remove.
func (s *Socket) Owns(path string) bool {
	id, err := fileID(path)
	return err == nil && id == s.ID
}

// RemoveIfOwned unlinks path when it names the socket s listens on, and
// reports whether it did.
func (s *Socket) RemoveIfOwned(path string) bool {
	if !s.Owns(path) {
		return false
	}
	return os.Remove(path) == nil
}

// control runs f with l's descriptor.
func control(l *net.UnixListener, f func(fd int) error) error {
	rc, err := l.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// BindOver listens at path whatever is there: a socket bound at a hidden
// name is renamed over it. The caller has proved, under the lock, that what
// is at the path is a socket it may replace: the rendezvous, which only the
// newest instance serves, or its own registration socket, re-announced so
// that the kubelet registers the driver again.
func BindOver(network, path string) (*Socket, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotSocket, fi.Mode().Type())
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+randomSuffix())
	s, err := listen(network, tmp)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil { // rename keeps the inode
		s.Close()
		os.Remove(tmp)
		return nil, err
	}
	return s, nil
}
