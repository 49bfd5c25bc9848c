package nodestatus

import (
	"github.com/csi-registrar/csi-registrar/registrar"
)

// The condition's reasons: True has one, False says what the registration
// waits for or what failed.
const (
	ReasonRegistered         = "DriverRegistered"        // True: the kubelet confirmed, the driver answers
	ReasonDriverNotAnswering = "DriverNotAnswering"      // no driver socket, or it does not answer Probe
	ReasonWaitingForKubelet  = "WaitingForKubelet"       // socket served, no confirmation yet
	ReasonKubeletRejected    = "KubeletRejected"         // the kubelet's NotifyRegistrationStatus(false)
	ReasonSocketError        = "RegistrationSocketError" // the registration socket cannot be served
	ReasonCSINodeLost        = "CSINodeLost"             // confirmed, but the API server lost the CSINode entry or the annotation, and registering again did not bring it back
)

// maxMessage bounds the condition's message (a kubelet error can be long).
const maxMessage = 1024

// desired is the condition the registrar's status calls for; ok is false
// when this instance must not write it: it does not hold the registration
// (standing by in a rollout), has not started, or has stopped.
func desired(st registrar.Status, lost string) (c Condition, ok bool) {
	switch st.Stage {
	case registrar.StageRegistered:
		if lost != "" {
			return falseCond(ReasonCSINodeLost, lost), true
		}
		return Condition{Status: "True", Reason: ReasonRegistered,
			Message: "the kubelet confirmed the registration of " + st.DriverName + " and the driver answers"}, true
	case registrar.StageWaitingForDriver:
		return falseCond(ReasonDriverNotAnswering, st.String()), true
	case registrar.StageWaitingForKubelet:
		return falseCond(ReasonWaitingForKubelet, st.String()), true
	case registrar.StageRejected:
		return falseCond(ReasonKubeletRejected, st.String()), true
	case registrar.StageSocketConflict, registrar.StageSocketNotASocket, registrar.StageSocketPermissionDenied,
		registrar.StageSocketDirectoryMissing, registrar.StageSocketError:
		return falseCond(ReasonSocketError, st.String()), true
	}
	return Condition{}, false // starting, standing by, stopped
}

func falseCond(reason, msg string) Condition {
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	return Condition{Status: "False", Reason: reason, Message: msg}
}

// sameState reports whether a and b say the same: status, reason, message.
func sameState(a, b *Condition) bool {
	return a != nil && b != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}
