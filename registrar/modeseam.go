package registrar

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The one seam between the plain control loop and the rolling-update
// mode: the loop calls these once per event kind on l.roll, which is nil
// without the mode (and until the driver first answered); on nil each is a
// no-op that leaves the event to the plain loop. The mode's own events
// (its peers, its alarms) come through channels that are nil without it.

// peerEvents, settleC, discoverC and leaveC are the mode's channels; nil
// (never ready) without the mode.
func (m *rolling) peerEvents() <-chan peerEvent {
	if m == nil || m.left {
		return nil
	}
	return m.events
}

func (m *rolling) settleC() <-chan time.Time {
	if m == nil {
		return nil
	}
	return m.settle.c()
}

func (m *rolling) discoverC() <-chan time.Time {
	if m == nil {
		return nil
	}
	return m.discover.c()
}

func (m *rolling) leaveC() <-chan time.Time {
	if m == nil {
		return nil
	}
	return m.leaveBy.c()
}

// onPeer, onSettled, onDiscovered, onSuccessorWaitOver: the mode's events.
func (m *rolling) onPeer(ev peerEvent) { m.l.onPeerEvent(ev) }

func (m *rolling) onSettled() {
	m.settle.stop()
	m.l.modeEvent(modeEvent{kind: evSettled})
}

func (m *rolling) onDiscovered() {
	m.discover.stop()
	m.l.modeEvent(modeEvent{kind: evDiscovered})
}

func (m *rolling) onSuccessorWaitOver() { m.l.onSuccessorWaitOver() }

// leave: the loop's ctx ended, or an error ends it. In the mode the loop
// enters the leaving stage and keeps serving events until the instance
// left; it reports whether it did (false without the mode: return now).
func (m *rolling) leave() bool {
	if m == nil {
		return false
	}
	m.l.rollLeave()
	return true
}

// leaving reports whether the loop is in the mode's leaving stage: only
// the kubelet's calls, the peers and the registration directory's events
// count then.
func (m *rolling) inLeavingStage() bool { return m != nil && m.leaving }

// done reports whether the instance left (the loop returns).
func (m *rolling) done() bool { return m != nil && m.left }

// end is called at shutdown: an instance that has not left yet leaves now,
// without waiting. It reports whether the mode handled the exit.
func (m *rolling) end() bool {
	if m == nil {
		return false
	}
	if !m.left {
		m.l.rollLeave()
	}
	if !m.left {
		m.waitOver = true
		m.l.modeEvent(modeEvent{kind: evSuccessorWaitOver})
	}
	return true
}

// announcement prepares the next announcement's socket (path, version)
// before create listens; ok is false without the mode (the plain path and
// version: the current socket is closed first).
func (m *rolling) announcement() (version string, ho *handoverServer, ok bool) {
	if m == nil {
		return "", nil, false
	}
	l := m.l
	if m.samePath {
		// The deleted announcement again: same path, same version.
		m.takeBack, m.removedOnly = "", nil
		m.self.update(func(st *InstanceState) { st.Confirmed, st.Failed = false, false })
	} else {
		l.nextAnnouncement()
	}
	self, _ := m.self.get()
	l.r.status.update(func(st *Status) { st.SocketPath = l.sock.path })
	return csiplugin.RollingUpdateVersion(self.Version), m.self, true
}

// onNotify: the kubelet's verdict; handled reports whether the mode took it.
func (m *rolling) onNotify(registered bool, kubeletErr string) (handled bool) {
	if m == nil {
		return false
	}
	m.l.rollNotify(registered, kubeletErr)
	return true
}

// onRetryDue: a scheduled re-creation is due; in the mode a new socket is a
// new announcement, which the mode decides on.
func (m *rolling) onRetryDue() (handled bool) {
	if m == nil {
		return false
	}
	m.l.modeEvent(modeEvent{kind: evRetryDue, detail: m.l.sock.reason})
	return true
}

// onSocketDeleted: our socket was deleted by someone else. In the mode it
// is served again at its path at once (stepRecreate), as without the mode,
// unless a newer instance holds the registration or a backoff runs.
func (m *rolling) onSocketDeleted() (handled bool) {
	if m == nil {
		return false
	}
	l := m.l
	m.lost, l.sock.cur = l.sock.cur, nil
	l.modeEvent(modeEvent{kind: evOwnRemoved, other: filepath.Base(l.sock.path)})
	if m.lost != nil { // not re-created
		l.log.Warn("registration socket was deleted; not re-created now", "outcome", "closed")
		m.lost.stop()
		m.lost = nil
	}
	return true
}

// reusesFreedPath reports whether a Remove at the socket's path while a
// re-creation waits is a reason to create at once: without the mode, yes;
// in the mode each announcement has a fresh path and the Remove is that of
// our own withdrawn announcement (creating at once would skip the backoff
// after a rejection: one rejection per kubelet round).
func (m *rolling) reusesFreedPath() bool { return m == nil }

// onDirEvent: a file event in the registration directory that is not about
// our current socket; handled reports whether the mode took it.
func (m *rolling) onDirEvent(name string, created, removed bool) (handled bool) {
	if m == nil {
		return false
	}
	m.l.onRollDirEvent(name, created, removed)
	return true
}

// renamed: the driver answers under another name; an error in the mode,
// where an instance registers one name for its life.
func (m *rolling) renamed(driverPath, newName, oldName string) error {
	if m == nil {
		return nil
	}
	return fmt.Errorf("the driver at %s now reports the name %q instead of %q: in the rolling-update mode an instance registers one name for its life; restart the pod",
		driverPath, newName, oldName)
}
