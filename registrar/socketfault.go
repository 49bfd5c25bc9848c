package registrar

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/csi-registrar/csi-registrar/registrar/sockfile"
)

// The kinds of listen error, as an error reports them with
//
//	ListenErrorKind() string
//
// (errors.As finds it anywhere in the chain; *sockfile.ListenError has it).
// Each has its own stage and its own socket_creations_total reason.
const (
	listenPermission       = sockfile.KindPermission       // EACCES/EPERM/EROFS in the registration directory
	listenMissingDirectory = sockfile.KindMissingDirectory // the registration directory does not exist
	listenInUse            = sockfile.KindInUse            // another live process serves a socket at the path
	listenNotASocket       = sockfile.KindNotSocket        // a file that is not a socket is at the path
)

// socketFault is what the control loop does about a registration path it
// cannot serve: the stage to enter, the reason of the next socket creation
// (a metric label) and the fix to log.
type socketFault struct {
	stage  Stage
	reason string
	fix    string
}

var socketFaults = map[string]socketFault{
	listenPermission: {StageSocketPermissionDenied, "permission",
		"run the registrar as a user that may create files in Options.PluginRegistrationPath (uid 0 on most nodes; the kubelet's directory is root-owned 0750)"},
	listenMissingDirectory: {StageSocketDirectoryMissing, "missing-directory",
		"mount the kubelet's plugins_registry (/var/lib/kubelet/plugins_registry) at Options.PluginRegistrationPath"},
	listenInUse: {StageSocketConflict, "conflict",
		"another process serves this path (is a second copy running?); it is taken over once that process removes it"},
	listenNotASocket: {StageSocketNotASocket, "not-a-socket",
		"remove or move the file at the path if nothing needs it; it is never removed by the registrar"},
}

// unclassified is the fault of a listen error of no known kind.
var unclassified = socketFault{StageSocketError, "listen-error", "see the error; the path is retried with backoff"}

// classifyListenError names what keeps path from being served. An error that
// reports its kind (ListenErrorKind) is taken at its word; otherwise the
// errno, and for EADDRINUSE the file now at the path, decide.
func classifyListenError(err error, path string) socketFault {
	var k interface{ ListenErrorKind() string }
	if errors.As(err, &k) {
		if f, ok := socketFaults[k.ListenErrorKind()]; ok {
			return f
		}
		return unclassified
	}
	switch {
	case errors.Is(err, fs.ErrPermission):
		return socketFaults[listenPermission]
	case errors.Is(err, fs.ErrNotExist):
		return socketFaults[listenMissingDirectory]
	case errors.Is(err, syscall.EADDRINUSE):
		return classifyForeignFile(path)
	}
	return unclassified
}

// classifyForeignFile names what is at path now that it is not our socket:
// a socket (served by somebody else, or being created) or another file.
func classifyForeignFile(path string) socketFault {
	st, err := os.Lstat(path)
	if err == nil && st.Mode().Type() != fs.ModeSocket {
		return socketFaults[listenNotASocket]
	}
	return socketFaults[listenInUse]
}
