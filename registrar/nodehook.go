package registrar

import "errors"

// The registrar's side of the node status reporter (registrar/nodestatus):
// it follows the Status and, when the API server lost what the kubelet
// wrote at the registration (the CSINode entry, the Node annotation), asks
// the control loop to register again. Nothing here runs unless it is called.

// reasonCSINodeLost is the socket creation reason (and the
// csi_registrar_socket_creations_total label) of Reregister.
const reasonCSINodeLost = "csinode-lost"

// WatchStatus returns the current Status and a channel that is closed at
// its next change, so that a follower waits on changes instead of polling.
func (r *Registrar) WatchStatus() (Status, <-chan struct{}) { return r.status.watch() }

// ErrNotRegistered is returned by Reregister when the registrar does not
// hold a confirmed registration to repeat.
var ErrNotRegistered = errors.New("the registrar holds no registration the kubelet confirmed")

// Reregister asks the control loop to serve a new registration socket at
// the same path, so that the kubelet's plugin watcher registers the driver
// again and its CSI handler writes the CSINode entry and the Node
// annotation again. why is logged. It returns when the loop took the
// request: nil when a new socket is being served, else ErrNotRegistered, or
// the error of a registrar that is not running. With RollingUpdate (the
// handover) the new socket replaces the one registration socket at its path.
// The request is counted in csi_registrar_socket_creations_total with
// reason "csinode-lost".
func (r *Registrar) Reregister(why string) error {
	reply := make(chan error, 1)
	select {
	case r.reregister <- reregisterRequest{why: why, reply: reply}:
		return <-reply
	case <-r.exited:
		return errors.New("the registrar has stopped")
	}
}

type reregisterRequest struct {
	why   string
	reply chan error
}

// onReregister is the handover loop's handler of Reregister: every
// instance that serves the socket gets the new one.
func (h *handoverLoop) onReregister(req reregisterRequest) {
	if !h.registered || h.reg == nil {
		req.reply <- ErrNotRegistered
		return
	}
	h.log.Warn("registering again on request", "why", req.why, "outcome", "re-announcing")
	h.r.metrics.addSocketCreation(reasonCSINodeLost)
	req.reply <- h.lock.Do(h.reannounce)
}

// onReregister is the control loop's handler of Reregister.
func (l *loop) onReregister(req reregisterRequest) {
	switch {
	case l.stage != StageRegistered || l.sock.cur == nil:
		req.reply <- ErrNotRegistered
	default:
		l.log.Warn("registering again on request", "why", req.why, "outcome", "recreating")
		l.create(reasonCSINodeLost)
		req.reply <- nil
	}
}
