package sockfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Kind is why Listen could not create a socket: the one enumeration of
// listen faults. Its values are also the reason labels the registrar's
// csi_registrar_socket_creations_total reports and its logs' outcome.
type Kind string

const (
	// KindPermission: this process may not create files in the directory
	// (EACCES, EPERM, or a read-only mount).
	KindPermission Kind = "permission"
	// KindMissingDirectory: the directory does not exist or is not a directory.
	KindMissingDirectory Kind = "missing-directory"
	// KindInUse: a live socket of another process is at the path, or another
	// process that uses this package holds the path's lock.
	KindInUse Kind = "conflict"
	// KindNotSocket: a regular file, directory, symbolic link or other
	// non-socket file is at the path.
	KindNotSocket Kind = "not-a-socket"
	// KindOther: anything else; the message says what.
	KindOther Kind = "listen-error"
)

// ListenError reports why Listen could not create a socket. Nothing at the
// path was changed or removed. Its message names the path, what was found
// or refused, and the fix.
type ListenError struct {
	Path   string // the socket path
	Kind   Kind   // why
	Reason string // what was found, and the rule it breaks
	Fix    string // what the user should do
	Err    error  // the system call's error, if any
}

func (e *ListenError) Error() string {
	msg := fmt.Sprintf("cannot create socket %s: %s", e.Path, e.Reason)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	if e.Kind == KindInUse || e.Kind == KindNotSocket {
		msg += "; it was left untouched"
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// Unwrap returns the system call's error.
func (e *ListenError) Unwrap() error { return e.Err }

// createError classifies the failure of a system call that creates a file in
// dir (the lock file or the socket).
func createError(path, dir, what string, err error) *ListenError {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return &ListenError{Path: path, Kind: KindPermission, Err: err,
			Reason: fmt.Sprintf("permission denied creating %s in %s (this process runs as uid %d)", what, dir, os.Geteuid()),
			Fix: "run as a user that may create files there (uid 0 for the kubelet's directories) and mount the " +
				"hostPath directory read-write (without readOnly)"}
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return missingDir(path, dir, err)
	}
	return &ListenError{Path: path, Kind: KindOther, Err: err,
		Reason: fmt.Sprintf("creating %s in %s failed", what, dir), Fix: "see the system error"}
}

func missingDir(path, dir string, err error) *ListenError {
	return &ListenError{Path: path, Kind: KindMissingDirectory, Err: err,
		Reason: fmt.Sprintf("the directory %s does not exist or is not a directory", dir),
		Fix: "mount the directory there (for the registrar: the kubelet's plugins_registry, " +
			"hostPath /var/lib/kubelet/plugins_registry, type Directory)"}
}

func notSocket(path string, mode fs.FileMode) *ListenError {
	return &ListenError{Path: path, Kind: KindNotSocket,
		Reason: fmt.Sprintf("it is a %s, not a socket, and only a socket this process created is ever removed", FileKind(mode)),
		Fix:    "remove or move it if nothing needs it"}
}

func inUse(path, reason string) *ListenError {
	return &ListenError{Path: path, Kind: KindInUse, Reason: reason,
		Fix: "stop the other process (is a second copy running?); the path is taken over once it is free or its socket is dead"}
}

// Occupied describes what is at path, which is not a socket this process
// created: a socket (served by somebody else, or being created) or another
// file. It is the error for a path taken over while it was served.
func Occupied(path string) *ListenError {
	st, err := os.Lstat(path)
	if err == nil && st.Mode().Type() != fs.ModeSocket {
		return notSocket(path, st.Mode())
	}
	return inUse(path, "another process's socket is at the path now")
}

// FileKind names the type of file m describes, e.g. "regular file".
func FileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	}
	return "non-socket file"
}
