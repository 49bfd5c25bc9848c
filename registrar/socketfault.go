package registrar

import (
	"errors"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// faultStages is the stage the control loop enters for each listen fault
// (sockfile.Kind, whose value is also the socket_creations_total reason and
// the log outcome; the fix is in the error's text).
var faultStages = map[sockfile.Kind]Stage{
	sockfile.KindPermission:       StageSocketPermissionDenied,
	sockfile.KindMissingDirectory: StageSocketDirectoryMissing,
	sockfile.KindInUse:            StageSocketConflict,
	sockfile.KindNotSocket:        StageSocketNotASocket,
	sockfile.KindOther:            StageSocketError,
}

// listenFault returns the kind of a sockfile.Listen error and the stage it
// puts the loop in.
func listenFault(err error) (sockfile.Kind, Stage) {
	kind := sockfile.KindOther
	var le *sockfile.ListenError
	if errors.As(err, &le) {
		kind = le.Kind
	}
	return kind, faultStages[kind]
}
