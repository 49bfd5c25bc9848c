package registrar

import (
	"slices"
	"strings"
)

// The rolling-update mode's decisions, in one place: a view of the
// instances of the driver on the node (this one and its peers), an event,
// and nextStep, a pure function from the two to the step the loop carries
// out, with the reason as evidence. The loop (rolling.go) only gathers
// events into the view, calls nextStep, and carries the step out. The
// table in rollmodel_test.go runs nextStep row by row and is the mode's
// table in docs/design.md.

// modeView is what the mode knows when it decides.
type modeView struct {
	self  InstanceState        // this instance (its latest announcement's version and verdict)
	peers map[string]peerState // the other instances watched, by instance
	// socket: an announcement of this instance is served.
	socket bool
	// standingBy: the loop's stage is StageStandingBy.
	standingBy bool
	// discovering: at start, the first states of the instances found on
	// the node are still awaited (discoveryWait).
	discovering bool
	// settling: the kubelet's deregistration after a Remove by name of
	// another socket is awaited (kubeletSettle).
	settling bool
	// retrying: a re-creation of the announcement is scheduled (a backoff).
	retrying bool
	// takeBack is why the last announcement on the node must again be this
	// instance's ("" none): kept until it can be done.
	takeBack string
	// removedOnly: the pending take-back is only for these sockets'
	// removals by name (nil: not only); unasked: sockets of other instances
	// that they unlinked by name because the kubelet never asked them
	// (their Withdrawn). A Remove of such a socket changes nothing for the
	// kubelet: no settle, no take-back.
	removedOnly []string
	unasked     map[string]bool
	// Leaving only: successor is an instance the kubelet confirmed after
	// this one, checked live just now ("" none); waitOver: successorWait
	// has passed.
	successor      string
	successorState InstanceState // as the live check answered
	waitOver       bool
	// driverUnready: this instance's driver has not answered Probe ready
	// yet, or it stopped (self.DriverDown) and has not been ready again for
	// driverStableWindow. While another instance may hold the registration,
	// this one then does not claim it (no announcement, no take-back).
	driverUnready bool
	// holding: leaving, a socket of this instance that the kubelet asked
	// is still served (current or previous; an unasked current one is
	// withdrawn when the instance starts leaving).
	holding bool
	// plainTaken: the driver's plain socket path (<driver>-reg.sock) is a
	// file that is not this instance's current announcement.
	plainTaken bool
	// plainLost: our announcement at the plain path was deleted by someone
	// else while the path was free; once it is taken (a registrar without
	// the mode: a rollback) this instance yields, else it takes back after
	// the settle.
	plainLost bool
	// yielded: a registrar without the mode took the plain path from this
	// instance's announcement (a rollback out of the mode): the kubelet
	// unregistered ours and registers that one at the same path, and this
	// instance no longer claims the registration, until that socket is
	// removed by name in turn.
	yielded bool
}

// peerState is another instance as its handover stream told it.
type peerState struct {
	st    InstanceState
	known bool // a state arrived
}

// eligible reports whether the peer may hold the registration.
func (p peerState) eligible() bool { return p.known && !p.st.Terminating && !p.st.Failed }

// modeEventKind is what happened.
type modeEventKind int

const (
	evBegin             modeEventKind = iota // the driver answered: the mode starts (peers found are watched)
	evPeerState                              // a peer told its state (other, old → st)
	evPeerGone                               // a peer's stream ended (other; known: it had told a state, st the last)
	evPeerMoved                              // a peer's stream ended and a later socket of it is watched now
	evSocketRemoved                          // another instance's announcement socket was unlinked by name
	evPlainRemoved                           // the driver's socket of a registrar without the mode was unlinked
	evPlainTaken                             // the plain path was taken again before this instance listened on it
	evOwnRemoved                             // our announcement socket was deleted by someone else
	evRetryDue                               // a scheduled re-creation is due (reason)
	evSettled                                // kubeletSettle passed
	evDiscovered                             // discoveryWait passed, or every peer told its state
	evConfirmed                              // the kubelet confirmed our latest announcement (self updated)
	evRejected                               // the kubelet rejected it (validation: in ValidatePlugin)
	evLeave                                  // this instance ends (ctx ended); self is terminating
	evSuccessorWaitOver                      // leaving: successorWait passed
	evDriverReady                            // this instance's driver answered Probe ready for the first time
	evDriverDown                             // it stopped answering Probe, or said not ready (self.DriverDown set)
	evDriverStable                           // after a down, it has been ready for driverStableWindow (DriverDown cleared)
)

var eventNames = map[modeEventKind]string{
	evBegin: "begin", evPeerState: "peer state", evPeerGone: "peer gone", evPeerMoved: "peer moved",
	evSocketRemoved: "socket removed", evPlainRemoved: "plain socket removed", evOwnRemoved: "own socket removed",
	evPlainTaken: "plain path taken",
	evRetryDue:   "retry due", evSettled: "settled", evDiscovered: "discovered", evConfirmed: "confirmed",
	evRejected: "rejected", evLeave: "leave", evSuccessorWaitOver: "successor wait over",
	evDriverReady: "driver ready", evDriverDown: "driver down", evDriverStable: "driver stable",
}

func (k modeEventKind) String() string { return eventNames[k] }

// modeEvent is one event with what the mode needs of it.
type modeEvent struct {
	kind    modeEventKind
	other   string        // the peer, or the socket's name (evSocketRemoved, evPlainRemoved, evOwnRemoved)
	old, st InstanceState // evPeerState: the peer's state before and now
	known   bool          // evPeerGone: it had told a state
	plain   bool          // evOwnRemoved: our socket was at the driver's plain path
	// evRetryDue: why the re-creation was scheduled; evRejected: the
	// kubelet's error.
	detail     string
	validation bool // evRejected: in ValidatePlugin (not a registration)
	// evRejected in ValidatePlugin: the kubelet cannot take the mode's CSI
	// version 1.<v>.0 itself (fallback.go).
	versionRefused bool
}

// stepKind is what the loop does.
type stepKind int

const (
	stepNothing            stepKind = iota // no change for the kubelet
	stepAnnounce                           // the first announcement of this instance
	stepTakeBack                           // announce again: the last announcement must be this instance's
	stepResume                             // standing by, and no newer instance remains: announce again
	stepStandBy                            // a newer instance holds or takes the registration
	stepRegistered                         // confirmed: earlier announcements retired, registered
	stepWithdraw                           // unlink the rejected announcement; announce again after a backoff
	stepWithdrawNoRetry                    // unlink the rejected announcement; another instance takes it back
	stepWait                               // announce when an alarm fires (settle, retry, discovery)
	stepWaitSuccessor                      // leaving: wait for an instance confirmed after this one
	stepRetireAndLeave                     // leave without unregistering: retire every socket
	stepUnregisterAndLeave                 // leave by unlinking: the kubelet unregisters the driver
	stepFallBack                           // the kubelet cannot take the mode's version: leave the mode, register as without it
	stepRecreate                           // our socket was deleted: serve it again at its path, same version
	stepLeave                              // leave: the kubelet asked no socket of this instance that is still served
	stepAnnounceAtPlain                    // a plain socket was removed: announce again at its path
	stepYield                              // a registrar without the mode took the plain path from ours: no claim
)

var stepNames = map[stepKind]string{
	stepNothing: "nothing", stepAnnounce: "announce", stepTakeBack: "take back", stepResume: "announce (resume)",
	stepStandBy: "stand by", stepRegistered: "registered", stepWithdraw: "withdraw, retry after backoff",
	stepWithdrawNoRetry: "withdraw, no retry", stepWait: "wait", stepWaitSuccessor: "wait for a successor",
	stepRetireAndLeave: "retire all and leave", stepRecreate: "re-create at the same path", stepLeave: "leave (nothing held)", stepUnregisterAndLeave: "unregister and leave",
	stepFallBack: "fall back to the plain registrar", stepAnnounceAtPlain: "announce again at the removed plain path",
	stepYield: "yield to the registrar without the mode",
}

func (k stepKind) String() string { return stepNames[k] }

// step is nextStep's answer.
type step struct {
	kind   stepKind
	reason string // the evidence, logged with the step
	other  string // the instance the step is about, if any
	// takeBack is the take-back still wanted after the step ("" none), and
	// removedOnly the removals it is only for (nil: not only).
	takeBack    string
	removedOnly []string
	// settle: arm kubeletSettle first (the kubelet unregisters the driver).
	settle bool
	// retirePrevious: retire the earlier announcements of this instance
	// (its latest is confirmed).
	retirePrevious bool
	// failed: publish that the kubelet failed our announcement before it
	// goes, so that the others see a failure, not a departure.
	failed bool
	// cleanup: leaving last: remove what dead instances left.
	cleanup bool
	// yield: publish the stage standing by (/readyz 503): another instance
	// holds the registration while this one's driver is not ready.
	yield bool
	// plainLost and yielded: the view's flags after the step.
	plainLost, yielded bool
}

// String is the step as the table in docs/design.md shows it.
func (s step) String() string {
	var parts []string
	if s.settle {
		parts = append(parts, "arm the settle alarm")
	}
	if s.retirePrevious {
		parts = append(parts, "retire previous")
	}
	if s.failed {
		parts = append(parts, "publish failed")
	}
	if s.yield {
		parts = append(parts, "publish standing by")
	}
	parts = append(parts, s.kind.String())
	if s.cleanup {
		parts = append(parts, "remove dead instances' files")
	}
	if s.takeBack != "" && s.kind != stepTakeBack {
		parts = append(parts, "take-back pending")
	}
	return strings.Join(parts, "; ")
}

// nextStep is the mode's one decision: from what it knows and what
// happened, the next step.
func nextStep(v modeView, ev modeEvent) step {
	if v.self.Terminating || ev.kind == evLeave {
		return leavingStep(v)
	}
	var s step // what the event asks for before the common rule
	s.takeBack, s.removedOnly = v.takeBack, v.removedOnly
	before := s.takeBack
	switch ev.kind {
	case evPeerGone:
		if ev.known && leftHolding(ev.st, v.self) {
			s.takeBack = "instance " + ev.other + " left"
		}
	case evPeerState:
		switch old, st := ev.old, ev.st; {
		case st.Failed && !old.Failed:
			// The CSI handler unregistered the driver before the kubelet
			// sent the peer its NotifyRegistrationStatus(false): that
			// deregistration is over, no settle.
			s.takeBack = "instance " + ev.other + " failed"
		case st.DriverDown && !old.DriverDown && st.NewerThan(v.self):
			// Its driver stopped answering: the kubelet's calls to its
			// endpoint fail. The kubelet unregistered nothing, so no settle:
			// a higher version switches the endpoint back to ours.
			s.takeBack = "newer instance " + ev.other + "'s driver does not answer Probe"
		case st.Terminating && !old.Terminating && st.NewerThan(v.self) && st.ConfirmedAt > 0:
			// It will leave; be confirmed after it, so that it can leave
			// without unregistering the driver. (Never confirmed: its
			// announcement is withdrawn unasked as it leaves, or the
			// kubelet's verdict on it comes later and is acted on then.)
			s.takeBack = "newer instance " + ev.other + " is terminating"
		case v.self.Version > 0 && st.ConfirmedAt != old.ConfirmedAt && mayBeConfirmedAfter(st, v.self) &&
			(!st.NewerThan(v.self) || st.Terminating):
			// The kubelet registered an instance that should not hold the
			// registration (an older one, or one that is leaving) after this one.
			s.takeBack = "the kubelet confirmed instance " + ev.other + " (older, or leaving) after this one"
		}
	case evSocketRemoved:
		if v.unasked[ev.other] {
			s.reason = "socket " + ev.other + " was never asked by the kubelet: its removal changes nothing for it"
			return s
		}
		// Unlinked by name: the kubelet unregisters the driver.
		var only []string // nil when a take-back for another cause is pending
		if v.takeBack == "" || v.removedOnly != nil {
			only = append(slices.Clone(v.removedOnly), ev.other)
		}
		s.settle, s.takeBack = true, "socket "+ev.other+" of another instance was removed"
		v.takeBack, v.removedOnly, v.settling = s.takeBack, only, true
		d := decide(v)
		d.settle = true
		return d
	case evPlainRemoved:
		// Announce again at the removed path, at once: the kubelet runs one
		// operation per socket path at a time and unregisters the removed
		// socket before it registers the new one at that path, so its
		// deregistration (by name) cannot undo the new registration, as for
		// the plain registrar. A registrar without the mode that left its
		// path to us (ours or node-driver-registrar) is gone for good.
		s.takeBack = "socket " + ev.other + " (a registrar without the rolling-update mode) was removed"
		v.takeBack, v.removedOnly, v.yielded, v.plainLost = s.takeBack, nil, false, false
		switch d := decide(v); d.kind {
		case stepTakeBack:
			d.kind, d.takeBack = stepAnnounceAtPlain, ""
			return d
		case stepWait:
			// Not now (discovering, a backoff, the driver not ready ...): a
			// take-back later, at a new path, must wait for the kubelet's
			// deregistration (settle alarm).
			v.settling = true
			d = decide(v)
			d.settle = true
			return d
		default:
			// A newer instance takes it (it announces at the path), or
			// this one makes no claim.
			return d
		}
	case evPlainTaken:
		// A registrar without the mode came back at the removed path before
		// this instance listened there (a rollback): its file is never
		// touched; a take-back at a new path must wait for the kubelet's
		// deregistration of the removed one.
		s.settle, s.takeBack = true, "the driver's plain socket path "+ev.other+" was taken again before this instance announced there"
	case evOwnRemoved:
		if ev.plain {
			if v.plainTaken {
				return yieldStep(v)
			}
			// Not re-created at that path: node-driver-registrar removes
			// whatever is at its path as it starts, then listens there (a
			// rollback out of the mode); a re-creation would make it fail.
			// Once the deregistration passed, the path decides: taken,
			// yield; free, take back at a new path.
			s.settle, s.takeBack = true, "our socket "+ev.other+" at the driver's plain path was deleted; a registrar without the mode may be taking the path"
			v.plainLost = true
			break
		}
		// At the same path at once, as without the mode: the kubelet
		// serializes its operations per path, so its deregistration of the
		// deleted socket ends before it registers the new one.
		s.takeBack = "our socket " + ev.other + " was deleted"
		v.takeBack, v.removedOnly = s.takeBack, nil
		d := decide(v)
		if d.kind == stepTakeBack {
			d.kind, d.takeBack = stepRecreate, ""
		}
		return d
	case evRetryDue:
		// A new socket, in the mode, is a new announcement.
		s.takeBack = "retry after " + ev.detail
	case evConfirmed:
		s.retirePrevious = true
		if inst, _ := newerPeer(v); inst == "" {
			s.kind, s.reason = stepRegistered, "kubelet confirmed the announcement"
			return s
		}
		// The kubelet re-registered this older instance (it restarted):
		// the newer one takes back.
	case evDriverDown:
		s.reason = "this instance's driver does not answer Probe: published (driverDown), so that an older instance takes the registration back"
		if othersEligible(v) {
			return s
		}
	case evDriverStable:
		// Another instance may have taken the registration while the
		// driver was down: the last announcement must again be ours.
		for inst, p := range v.peers {
			if p.eligible() && !p.st.NewerThan(v.self) && mayBeConfirmedAfter(p.st, v.self) {
				s.takeBack = "instance " + inst + " was confirmed after this one while this instance's driver was down"
			}
		}
	case evRejected:
		if ev.validation && ev.versionRefused {
			s.kind, s.reason = stepFallBack, "the kubelet's validation refused the mode's CSI version itself: this kubelet cannot run the mode; unlinking the announcement and registering as the plain registrar does"
			return s
		}
		s.kind = stepWithdraw
		s.reason = "kubelet rejected the announcement; unlinking it, which the kubelet does not count as registered"
		if !ev.validation {
			s.failed = true
			if othersEligible(v) {
				s.kind = stepWithdrawNoRetry
			}
		}
		return s
	}
	if s.takeBack != before {
		s.removedOnly = nil // a take-back for another cause than a removal
	}
	v.takeBack, v.removedOnly = s.takeBack, s.removedOnly
	v.settling = v.settling || s.settle
	d := decide(v)
	d.settle, d.retirePrevious = s.settle, s.retirePrevious
	return d
}

// yieldStep: a registrar without the mode holds the plain path that was
// this instance's: no claim on the registration, no take-back.
func yieldStep(v modeView) step {
	return step{kind: stepYield, yielded: true, reason: "a registrar without the rolling-update mode took the driver's plain socket path " +
		"from this instance's announcement (a rollback out of the mode): the kubelet registers it there after it unregistered ours"}
}

// decide is the rule after every event: whether this instance announces now.
func decide(v modeView) step {
	if v.takeBack != "" && v.removedOnly != nil && allUnasked(v) {
		// Every removal the take-back was for turned out to be of a socket
		// the kubelet never asked: nothing to take back.
		v.takeBack, v.removedOnly = "", nil
	}
	s := step{takeBack: v.takeBack, removedOnly: v.removedOnly, plainLost: v.plainLost, yielded: v.yielded}
	switch {
	case v.yielded:
		s.kind, s.takeBack, s.removedOnly = stepNothing, "", nil
		s.reason = "a registrar without the rolling-update mode holds the driver's plain socket path: no claim until it is removed"
		return s
	case v.plainLost && v.plainTaken:
		return yieldStep(v)
	}
	if v.discovering {
		s.kind, s.reason = stepWait, "the first states of the instances found on the node are awaited"
		return s
	}
	if inst, _ := newerPeer(v); inst != "" {
		s.takeBack, s.removedOnly, s.other = "", nil, inst
		if v.standingBy {
			s.reason = "already standing by"
			return s
		}
		s.kind, s.reason = stepStandBy, "a newer instance holds or takes the registration"
		return s
	}
	if v.self.Failed && othersEligible(v) {
		s.reason = "the kubelet failed ours while another holds it: no cycle of registrations"
		return s
	}
	if v.driverUnready && othersEligible(v) && (v.takeBack != "" || !v.socket || v.standingBy) {
		s.kind, s.reason = stepWait, "this instance's driver has not answered Probe ready (or not for the stable window since it stopped): "+
			"no claim on the registration while another instance may hold it"
		s.yield = v.socket && !v.standingBy && v.takeBack != ""
		return s
	}
	if v.settling {
		s.kind, s.reason = stepWait, "the kubelet's deregistration must pass first (settle alarm)"
		return s
	}
	if v.retrying && !v.socket {
		s.kind, s.reason = stepWait, "a re-creation is scheduled (backoff)"
		return s
	}
	switch {
	case v.takeBack != "":
		s.kind, s.reason = stepTakeBack, v.takeBack
	case !v.socket:
		s.kind, s.reason = stepAnnounce, "no announcement yet, and no newer instance"
	case v.standingBy && v.self.Confirmed:
		// No take-back is pending: no instance the kubelet confirmed after
		// ours left holding the registration. Ours stands.
		s.kind, s.reason = stepRegistered, "the newer instance left without the kubelet holding it; this instance's confirmed announcement stands"
	case v.standingBy:
		s.kind, s.reason = stepResume, "the newer instance left; waiting for the kubelet"
	default:
		s.reason = "this instance's announcement stands"
	}
	return s
}

// leavingStep is the rule while this instance leaves: retire every socket
// if another instance was confirmed after this one (checked live), else
// wait for one while one may come (successorWait), else unregister.
func leavingStep(v modeView) step {
	switch {
	case !v.holding:
		// Nothing of this instance can be in the kubelet's actual state:
		// leaving changes nothing for it.
		return step{kind: stepLeave, cleanup: !othersLive(v),
			reason: "the kubelet asked no socket of this instance that is still served"}
	case v.successor != "":
		return step{kind: stepRetireAndLeave, other: v.successor,
			reason: "instance " + v.successor + " was confirmed by the kubelet after this one (checked live)"}
	case !v.waitOver && successorMayCome(v):
		// Alone, this instance cannot tell a deleted pod, whose
		// replacement the DaemonSet controller starts at once (maxSurge),
		// from an uninstall: it waits as long for an instance to appear.
		return step{kind: stepWaitSuccessor, reason: "another instance may yet be confirmed after this one"}
	}
	return step{kind: stepUnregisterAndLeave, cleanup: !othersLive(v),
		reason: "no instance was confirmed after this one"}
}

// leftHolding reports whether an instance that left (its last state o) may
// have left the kubelet holding its endpoint: not when it named this
// instance, confirmed now, as confirmed after it (it retired its sockets),
// nor when the kubelet never confirmed it and its latest announcement was
// withdrawn unasked. (A socket it unlinked by name is a removal of its own.)
func leftHolding(o, self InstanceState) bool {
	switch {
	case o.Successor != "" && o.Successor == self.Instance && self.Confirmed && !o.Failed:
		return false
	case o.ConfirmedAt == 0 && o.Withdrawn != 0 && o.Withdrawn == o.Version:
		return false
	}
	return true
}

// allUnasked reports whether every removal the pending take-back is for
// was of a socket the kubelet never asked.
func allUnasked(v modeView) bool {
	for _, name := range v.removedOnly {
		if !v.unasked[name] {
			return false
		}
	}
	return true
}

// newerPeer returns the newest eligible instance newer than self whose
// driver answers, if any.
func newerPeer(v modeView) (string, peerState) {
	var inst string
	var best peerState
	for i, p := range v.peers {
		if p.eligible() && !p.st.DriverDown && p.st.NewerThan(v.self) && (inst == "" || p.st.NewerThan(best.st)) {
			inst, best = i, p
		}
	}
	return inst, best
}

// othersEligible reports whether another instance may hold the registration.
func othersEligible(v modeView) bool {
	for _, p := range v.peers {
		if p.eligible() {
			return true
		}
	}
	return false
}

// successorMayCome reports whether an instance may yet be confirmed after
// this leaving one: another may hold the registration, or has not answered
// yet (a pod that is starting; a dead instance's socket stops counting once
// its watch gives up, after firstStateWait), or none is known at all
// (alone: a deleted pod's replacement may be starting).
func successorMayCome(v modeView) bool {
	if len(v.peers) == 0 || othersEligible(v) {
		return true
	}
	for _, p := range v.peers {
		if !p.known {
			return true
		}
	}
	return false
}

// othersLive reports whether another instance that is not ending answers.
func othersLive(v modeView) bool {
	for _, p := range v.peers {
		if p.known && !p.st.Terminating {
			return true
		}
	}
	return false
}

// mayBeConfirmedAfter reports whether the kubelet may have acted on o's
// latest confirmed announcement after self's: o's confirmation is not
// strictly earlier. ConfirmedAt has millisecond resolution, and a kubelet
// that restarts registers every socket concurrently: two confirmations in
// the same millisecond are common, and either endpoint may be the one the
// CSI handler stored. The newer instance then announces again: one more
// registration, never a wrong endpoint.
func mayBeConfirmedAfter(o, self InstanceState) bool {
	return o.ConfirmedAt > 0 && o.ConfirmedAt >= self.ConfirmedAt
}
