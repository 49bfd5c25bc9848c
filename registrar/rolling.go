package registrar

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// The rolling-update mode (Options.RollingUpdate): several instances of one
// driver on a node (old and new pods of a DaemonSet rolling with maxSurge)
// hand the kubelet's registration over without the kubelet ever
// unregistering the driver. The rules, from what the kubelet's plugin
// manager and CSI handler do (docs/design.md, "Rolling updates"):
//
//   - Each announcement is a fresh socket, <prefix>_<instance>_<v>-reg.sock,
//     announcing CSI version 1.<v>.0 with v above every version announced
//     before on the node: the CSI handler accepts a second registration of a
//     name only with a strictly higher version, and then switches the
//     driver's endpoint to it.
//   - Only the newest live instance (latest pod birth) announces; the others
//     stand by. An instance that restarts in its pod keeps its birth (a
//     hidden birth file), so it never outbids a newer pod.
//   - An instance leaves without a Remove of a socket the kubelet may hold
//     (rename to a hidden name, then unlink: the plugin watcher ignores
//     both) only when another instance is confirmed after it, checked live
//     through the handover service (handover.go). Otherwise it unlinks by
//     name, as without the mode: the kubelet unregisters the driver.
//   - Whenever another instance dies, fails, was confirmed by the kubelet
//     after this one, or leaves without naming this one as its confirmed
//     successor, the newest instance announces again: the survivor has the
//     last word. After a Remove by name of another instance's socket (the
//     kubelet unregisters the driver) it waits kubeletSettle first, so that
//     the kubelet's own deregistration cannot undo the new registration; not
//     after a failure (the kubelet tells the failure only once the CSI
//     handler's deregistration ended). Our own deleted socket is served
//     again at its path at once, and after a registrar without the mode
//     unlinked <driver>-reg.sock the instance announces again at that path
//     at once: the kubelet orders the two per path.
//   - A rejection in the kubelet's validation is not a registration: the
//     socket is unlinked by name (the kubelet would retry it forever) and is
//     not taken as evidence of the kubelet's own retries.
//   - A terminating instance never announces.
//   - While another instance runs, an instance claims the registration
//     only while its own driver answers Probe ready (rolldriver.go): a
//     newer one whose driver stops hands it back to the older one, and
//     claims it again after driverStableWindow.
const (
	// kubeletSettle is how long an announcement at a new path waits after a
	// Remove by name of another registered socket (another instance's, or
	// the plain registrar's when its path cannot be reused: docs/design.md
	// lists the cases): the kubelet's reconciler runs every second and
	// unregisters the driver in its next round; the rest is margin for its
	// API writes (docs/design.md states the bound).
	kubeletSettle = 3 * time.Second
	// discoveryWait bounds the wait, at start, for the first state of each
	// instance found on the node before deciding whether to announce.
	discoveryWait = 2 * time.Second
	// successorWait bounds how long a terminating instance waits for
	// another one to appear (when it is alone) and be confirmed after it,
	// so that it can leave without unregistering the driver; well within
	// the manifests' terminationGracePeriodSeconds (10 s). An uninstall
	// unregisters the driver this much later.
	successorWait = 5 * time.Second
	// liveCheckTimeout bounds the live check of a successor at exit.
	liveCheckTimeout = time.Second
	// maxAnnouncementVersion is the largest version whose socket name the
	// length checks allow for (13 digits: Unix milliseconds until 2286).
	maxAnnouncementVersion = 9_999_999_999_999
)

// Decisions of the mode (csi_registrar_rolling_update_decisions_total).
const (
	decisionAnnounce   = "announce"   // a new announcement socket
	decisionConfirmed  = "confirmed"  // the kubelet confirmed an announcement
	decisionRetire     = "retire"     // a socket left without unregistering (a newer one is confirmed)
	decisionUnregister = "unregister" // left by unlinking: no confirmed successor
	decisionTakeBack   = "take-back"  // announce again: another instance left, failed, or was confirmed after this one
	decisionStandBy    = "stand-by"   // a newer instance holds the registration
	decisionWithdraw   = "withdraw"   // the kubelet rejected an announcement: unlinked (not registered)
)

var rollingDecisions = []string{decisionAnnounce, decisionConfirmed, decisionRetire, decisionUnregister,
	decisionTakeBack, decisionStandBy, decisionWithdraw, decisionDriverDown}

// reasonTakeBack is the socket creation reason of an announcement that
// takes the registration back.
const reasonTakeBack = "take-back"

// rolling is the mode's part of the loop's state: the view's sources
// (rollmodel.go decides on them).
type rolling struct {
	l        *loop
	dir      string // the registration directory
	self     *handoverServer
	previous []*servingSocket // earlier announcements, retired once the latest is confirmed
	peers    map[string]*peer // the other instances of the driver, by instance
	events   chan peerEvent
	stop     context.CancelFunc // ends the watches
	watchCtx context.Context
	watches  sync.WaitGroup
	// takeBack is why the last announcement on the node must again be this
	// instance's ("" none), kept until it can be done.
	takeBack string
	// removedOnly: the pending take-back is only for these sockets' removals
	// by name (nil: not only).
	removedOnly []string
	// gone is the last state of each instance whose stream ended.
	gone     map[string]InstanceState
	settle   alarm // no announcement before it fires
	discover alarm // at start: the peers' first states are awaited
	// Leaving (ctx ended, or an error ended the loop): leaveBy is
	// successorWait, waitOver once it fired; left once the instance left
	// (the loop then returns).
	leaving  bool
	leaveBy  alarm
	waitOver bool
	left     bool
	// This instance's driver as the mode's Probes saw it (rolldriver.go):
	// probe asks it while another eligible instance runs; stable fires
	// once it has been ready for driverStableWindow after a down.
	health driverHealth
	probe  alarm
	stable alarm
	// lost is our announcement whose file someone deleted, until it is
	// re-created at its path (samePath while create runs) or closed.
	lost     *servingSocket
	samePath bool
	// superseded is our unasked announcement that the one being created
	// replaces: unlinked by name once that one listens.
	superseded *servingSocket
	// The driver's plain socket path (<driver>-reg.sock), where this
	// instance announces again after a registrar without the mode unlinked
	// it: atPlain while create runs for it (plainTaken if the path was
	// taken first); plainLost and yielded as nextStep keeps them
	// (rollmodel.go); plainEchoes counts our own unlinks of that path whose
	// Remove events are still to come.
	plain       string
	atPlain     bool
	plainTaken  bool
	plainLost   bool
	yielded     bool
	plainEchoes int
}

// peer is another instance of the driver, watched through its latest socket.
type peer struct {
	path    string
	version uint64
	st      InstanceState
	known   bool // a state arrived
	cancel  context.CancelFunc
}

// checkAnnouncementPath checks that the driver's longest announcement
// socket fits a unix socket address in dir.
func checkAnnouncementPath(dir, driverName string) error {
	p := filepath.Join(dir, csiplugin.RollingUpdateSocketName(driverName, strings.Repeat("f", csiplugin.InstanceIDLength), maxAnnouncementVersion))
	return ruleOf(OptionPluginRegistrationPath, csiplugin.CheckSocketPathLength("rolling-update socket path", p,
		"shorten the plugin registration path"))
}

// rollBegin starts the mode once the driver answered: the birth, the
// instances already on the node, then the first decision.
func (l *loop) rollBegin() {
	dir := l.r.opts.PluginRegistrationPath
	inst := csiplugin.InstanceID(l.r.opts.RollingUpdate)
	birth := l.readBirth(dir, inst)
	ctx, stop := context.WithCancel(context.Background())
	l.roll = &rolling{
		l:        l,
		dir:      dir,
		self:     newHandoverServer(InstanceState{Driver: l.driver.name, Instance: inst, Birth: birth}),
		peers:    map[string]*peer{},
		gone:     map[string]InstanceState{},
		events:   make(chan peerEvent),
		stop:     stop,
		watchCtx: ctx,
		settle:   newAlarm(l.r.clock),
		discover: newAlarm(l.r.clock),
		leaveBy:  newAlarm(l.r.clock),
		probe:    newAlarm(l.r.clock),
		stable:   newAlarm(l.r.clock),
		plain:    filepath.Join(dir, l.driver.name+csiplugin.RegistrationSocketSuffix),
	}
	l.r.metrics.enableRollingUpdate()
	l.log = l.log.With("instance", inst)
	l.log.Info("rolling-update mode", "birth", time.UnixMilli(birth).UTC().Format(time.RFC3339Nano), "podUID", l.r.opts.RollingUpdate)
	l.removePreBoot()
	found := l.scan()
	for name, s := range found {
		if s.instance == inst {
			// Ours, from before this container restarted: dead. Removed
			// through a hidden name, as the kubelet may hold it.
			if ok, err := sockfile.RemoveDead(filepath.Join(dir, name)); ok {
				l.log.Info("removed a socket of this instance's previous container", "removed", name)
			} else if err != nil {
				l.log.Warn("a socket of this instance's previous container is not dead; left", "path", name, "err", err)
			}
			continue
		}
		l.watchInstance(s.instance, filepath.Join(dir, name), s.version)
	}
	if len(l.roll.peers) > 0 {
		l.roll.discover.set(discoveryWait)
	}
	l.modeEvent(modeEvent{kind: evBegin})
}

// view gathers what the mode decides on. While leaving, it checks live
// whether a successor was confirmed after this instance.
func (l *loop) view() modeView {
	self, _ := l.roll.self.get()
	v := modeView{
		self:        self,
		peers:       make(map[string]peerState, len(l.roll.peers)),
		socket:      l.sock.cur != nil,
		standingBy:  l.stage == StageStandingBy,
		discovering: l.roll.discover.armed(),
		settling:    l.roll.settle.armed(),
		retrying:    l.alarms.retryAt.armed(),
		takeBack:    l.roll.takeBack,
		removedOnly: l.roll.removedOnly,
		unasked:     map[string]bool{},
		waitOver:    l.roll.waitOver,
		// The driver's own readiness, from the mode's Probes.
		driverUnready: l.roll.driverUnready(),
		holding:       l.sock.cur != nil || len(l.roll.previous) > 0,
		plainTaken:    l.plainTakenByOther(),
		plainLost:     l.roll.plainLost,
		yielded:       l.roll.yielded,
	}
	withdrawn := func(inst string, st InstanceState) {
		if st.Withdrawn != 0 {
			v.unasked[csiplugin.RollingUpdateSocketName(l.driver.name, inst, st.Withdrawn)] = true
		}
		for _, name := range st.Removed {
			v.unasked[name] = true
		}
	}
	withdrawn(self.Instance, self)
	for inst, st := range l.roll.gone {
		withdrawn(inst, st)
	}
	for inst, p := range l.roll.peers {
		v.peers[inst] = peerState{st: p.st, known: p.known}
		withdrawn(inst, p.st)
	}
	if self.Terminating {
		v.successor, v.successorState = l.confirmedSuccessor(self)
	}
	return v
}

// modeEvent decides on ev and carries out the step; nothing once the
// instance left.
func (l *loop) modeEvent(ev modeEvent) {
	if l.roll.left {
		return
	}
	v := l.view()
	s := nextStep(v, ev)
	l.log.Debug("rolling-update step", "event", ev.kind.String(), "step", s.String(), "reason", s.reason)
	l.carryOut(v, s)
	if l.roll == nil { // fell back to the plain registrar (fallback.go)
		return
	}
	l.keepProbing()
	l.publishFallback()
}

// carryOut does what nextStep decided.
func (l *loop) carryOut(v modeView, s step) {
	l.roll.takeBack, l.roll.removedOnly = s.takeBack, s.removedOnly
	l.roll.plainLost, l.roll.yielded = s.plainLost, s.yielded
	if s.settle {
		l.roll.settle.set(kubeletSettle)
	}
	if s.retirePrevious {
		l.retirePrevious("a later announcement of this instance is confirmed")
	}
	if s.yield {
		l.publish(StageStandingBy, "this instance's driver stopped answering Probe: another instance holds the registration until it has been ready for "+
			short(driverStableWindow))
	}
	switch s.kind {
	case stepNothing, stepWait, stepWaitSuccessor:
	case stepAnnounce:
		l.create(reasonStart)
	case stepTakeBack:
		l.decision(decisionTakeBack, "announcing again: the last announcement on the node must be this instance's", "why", s.reason)
		l.create(reasonTakeBack)
	case stepResume:
		l.publish(StageWaitingForKubelet, "the newer instance left; waiting for the kubelet")
		l.create(reasonTakeBack)
	case stepStandBy:
		p := v.peers[s.other]
		l.decision(decisionStandBy, s.reason, "newer", s.other, "newerBirth", p.st.Birth, "newerConfirmed", p.st.Confirmed)
		l.alarms.retryAt.stop()
		l.await(awaitNothing, 0)
		l.publish(StageStandingBy, "instance "+s.other+" is newer and holds or takes the registration")
	case stepRegistered:
		l.publish(StageRegistered, "")
	case stepWithdraw, stepWithdrawNoRetry:
		l.withdraw(s)
	case stepRetireAndLeave:
		l.retireAndLeave(v, s)
	case stepUnregisterAndLeave:
		l.unregisterAndLeave(s)
	case stepFallBack:
		l.fallBack(s)
	case stepRecreate:
		l.recreateDeleted()
	case stepAnnounceAtPlain:
		l.announceAtPlain(s)
	case stepYield:
		l.decision(decisionStandBy, s.reason, "plainPath", l.roll.plain)
		l.alarms.retryAt.stop()
		l.await(awaitNothing, 0)
		l.publish(StageStandingBy, "a registrar without the rolling-update mode holds the registration at "+l.roll.plain)
	case stepLeave:
		l.decision(decisionRetire, "left: the kubelet holds no socket of this instance", "why", s.reason)
		if s.cleanup {
			l.removeLeftovers()
		}
		l.rollEnd()
	}
}

// recreateDeleted serves our deleted announcement again at its path with
// its version, as the plain registrar does: the kubelet's operations on one
// path run one at a time (its goroutinemap is keyed by the socket path, and
// its reconciler unregisters the old registration before it registers the
// new one), so the CSI handler's deregistration ends before the new
// registration starts and cannot undo it. The deleted socket's listener and
// lock go first; its handover streams end only once the new socket listens,
// so the others find this instance at the same path (onPeerEvent) instead
// of seeing it leave.
func (l *loop) recreateDeleted() {
	lost := l.roll.lost
	l.roll.lost = nil
	l.log.Warn("registration socket was deleted; re-creating it at its path", "outcome", "recreating")
	if lost != nil {
		lost.sock.Close() // its file is gone: nothing is unlinked
	}
	l.roll.samePath = true
	l.create(reasonDeleted)
	l.roll.samePath = false
	if lost != nil {
		lost.stop()
	}
}

// announceAtPlain announces again at the driver's plain socket path, which
// a registrar without the mode unlinked by name: the kubelet unregisters
// the removed socket before it registers ours there (one operation per
// path), so no settle is needed. The announcement is a new one (a version
// above every one on the node: the kubelet's validation takes a version
// equal to the registered one for a conflict), served as any other: the
// earlier ones are retired once it is confirmed. A file at the path (a
// registrar without the mode came back: a rollback) is never touched: the
// mode then waits for the deregistration and takes back at a new path.
func (l *loop) announceAtPlain(s step) {
	if _, err := os.Lstat(l.roll.plain); err == nil {
		l.modeEvent(modeEvent{kind: evPlainTaken, other: filepath.Base(l.roll.plain)})
		return
	}
	l.decision(decisionTakeBack, "announcing again at the removed plain socket's path: the kubelet unregisters the removed one before it registers this one",
		"why", s.reason)
	l.roll.atPlain, l.roll.plainTaken, l.roll.plainEchoes = true, false, 0
	l.create(reasonTakeBack)
	l.roll.atPlain = false
	if l.roll.plainTaken {
		l.roll.plainTaken = false
		l.modeEvent(modeEvent{kind: evPlainTaken, other: filepath.Base(l.roll.plain)})
	}
}

// plainTakenByOther reports whether a file is at the driver's plain socket
// path that is not our current announcement.
func (l *loop) plainTakenByOther() bool {
	if l.sock.cur != nil && l.sock.path == l.roll.plain {
		return false
	}
	_, err := os.Lstat(l.roll.plain)
	return err == nil
}

// onPlainLost: our announcement at the plain path is no longer ours
// (deleted, or replaced by another file): its listener goes (nothing is
// unlinked: the file is not ours), and nextStep decides. Reports whether
// the current socket was at the plain path.
func (m *rolling) onPlainLost() bool {
	if m == nil || m.l.sock.cur == nil || m.l.sock.path != m.plain {
		return false
	}
	l := m.l
	lost := l.sock.cur
	l.sock.cur = nil
	lost.stop()
	l.log.Warn("our announcement at the driver's plain socket path was deleted or replaced; not re-created there", "outcome", "closed")
	l.modeEvent(modeEvent{kind: evOwnRemoved, other: filepath.Base(m.plain), plain: true})
	return true
}

// unlinked notes an unlink by name of our socket at path, so that its
// Remove event at the plain path is not taken for a plain registrar's.
func (m *rolling) unlinked(path string, removed bool) {
	if m != nil && removed && path == m.plain {
		m.plainEchoes++
	}
}

// withdraw unlinks the announcement the kubelet rejected.
func (l *loop) withdraw(s step) {
	l.decision(decisionWithdraw, s.reason, "kubeletError", l.sock.handled.GetError(), "inValidation", !s.failed)
	if s.failed {
		// Told before the socket goes, so that the others see a failure
		// (and wait for the kubelet's deregistration), not a departure.
		l.roll.self.update(func(st *InstanceState) { st.Failed = true })
	}
	l.closeSocket("rejected")
	l.await(awaitNothing, 0)
	kubeletErr := l.sock.handled.GetError()
	if s.kind == stepWithdrawNoRetry {
		l.publish(StageRejected, kubeletErr+" (another instance remains and takes the registration back; this one does not retry: delete its pod to try again)")
		return
	}
	d := l.scheduleRetry(reasonRejected)
	l.publish(StageRejected, kubeletErr+" (announcing again in "+short(d)+")")
}

// readBirth returns when this pod first ran, from its birth file, creating
// the file on the pod's first run.
func (l *loop) readBirth(dir, inst string) int64 {
	path := filepath.Join(dir, csiplugin.BirthFileName(l.driver.name, inst))
	if b, err := os.ReadFile(path); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			return v
		}
	}
	now := l.r.clock.Now().UnixMilli()
	if err := os.WriteFile(path, []byte(strconv.FormatInt(now, 10)+"\n"), 0o600); err != nil {
		l.log.Warn("cannot record this instance's birth; a restart of this container will count as a new pod", "path", path, "err", err)
	}
	return now
}

type foundSocket struct {
	instance string
	version  uint64
}

// scan lists the driver's announcement sockets in the registration
// directory, the latest of each instance.
func (l *loop) scan() map[string]foundSocket {
	entries, err := os.ReadDir(l.roll.dir)
	if err != nil {
		l.log.Warn("cannot list the registration directory", "err", err)
		return nil
	}
	latest := map[string]string{} // instance → name
	out := map[string]foundSocket{}
	for _, e := range entries {
		inst, v, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, e.Name())
		if !ok || e.Type() != fs.ModeSocket {
			continue
		}
		if prev, seen := latest[inst]; seen {
			if out[prev].version > v {
				continue
			}
			delete(out, prev)
		}
		latest[inst] = e.Name()
		out[e.Name()] = foundSocket{inst, v}
	}
	if inst, v, ok := l.instanceAtPlain(); ok {
		if prev, seen := latest[inst]; !seen || out[prev].version < v {
			delete(out, prev)
			out[filepath.Base(l.roll.plain)] = foundSocket{inst, v}
		}
	}
	return out
}

// instanceAtPlain asks the socket at the driver's plain path, if any and
// not our current one, which instance of the mode serves it: an instance
// announces there after a registrar without the mode left it, and the name
// carries no instance. A registrar without the mode does not serve the
// handover service (not an instance); nor does a dead socket.
func (l *loop) instanceAtPlain() (inst string, version uint64, ok bool) {
	if !l.plainTakenByOther() {
		return "", 0, false
	}
	if fi, err := os.Lstat(l.roll.plain); err != nil || fi.Mode().Type() != fs.ModeSocket {
		return "", 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveCheckTimeout)
	defer cancel()
	st, err := fetchState(ctx, l.roll.plain)
	if err != nil || st.Driver != l.driver.name || st.Instance == "" || st.Version == 0 {
		return "", 0, false
	}
	return st.Instance, st.Version, true
}

// watchInstance watches the instance through its socket at path, unless a
// later socket of it is watched already.
func (l *loop) watchInstance(inst, path string, version uint64) {
	if p, ok := l.roll.peers[inst]; ok {
		if p.version >= version {
			return
		}
		p.cancel()
	}
	ctx, cancel := context.WithCancel(l.roll.watchCtx)
	p := &peer{path: path, version: version, cancel: cancel}
	if old, ok := l.roll.peers[inst]; ok {
		p.st, p.known = old.st, old.known
	}
	l.roll.peers[inst] = p
	l.roll.watches.Add(1)
	go func() {
		defer l.roll.watches.Done()
		watchPeer(ctx, l.r.clock, path, l.roll.events)
	}()
}

// onPeerEvent: a watched instance told its state, or its stream ended.
func (l *loop) onPeerEvent(ev peerEvent) {
	var inst string
	var p *peer
	for i, q := range l.roll.peers {
		if q.path == ev.path {
			inst, p = i, q
		}
	}
	if p == nil {
		return // a stream that was replaced
	}
	if ev.gone {
		p.cancel()
		delete(l.roll.peers, inst)
		if p.known {
			l.roll.gone[inst] = p.st
		}
		for name, s := range l.scan() {
			// A later socket of it; or the same one re-created at its path
			// after someone deleted it (it answers, unlike a dead one's).
			path := filepath.Join(l.roll.dir, name)
			if s.instance == inst && (s.version > p.version || s.version == p.version && !refused(path)) {
				l.watchInstance(inst, path, s.version)
				l.roll.peers[inst].st, l.roll.peers[inst].known = p.st, p.known
				l.modeEvent(modeEvent{kind: evPeerMoved, other: inst})
				return
			}
		}
		if !p.known {
			// It never answered: a dead instance's socket, not one that
			// left. Nothing changed for the kubelet.
			l.log.Info("another instance's socket does not answer", "other", inst, "socket", filepath.Base(p.path), "err", ev.err)
			l.discovered()
		} else {
			l.log.Info("another instance left", "other", inst, "lastState", p.st, "err", ev.err)
		}
		l.modeEvent(modeEvent{kind: evPeerGone, other: inst, known: p.known, st: p.st})
		return
	}
	old := p.st
	p.st, p.known = ev.st, true
	l.log.Debug("peer state", "other", inst, "socket", filepath.Base(ev.path))
	if ev.st.Failed && !old.Failed {
		l.log.Info("the kubelet failed another instance's registration", "other", inst, "version", ev.st.Version)
	}
	l.discovered()
	l.modeEvent(modeEvent{kind: evPeerState, other: inst, old: old, st: ev.st})
}

// discovered ends the discovery at start once every peer told its state.
func (l *loop) discovered() {
	if !l.roll.discover.armed() {
		return
	}
	for _, p := range l.roll.peers {
		if !p.known {
			return
		}
	}
	l.roll.discover.stop()
}

// onRollDirEvent: a file event in the registration directory that is not
// about our current socket.
func (l *loop) onRollDirEvent(name string, created, removed bool) {
	if inst, v, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, name); ok {
		self, _ := l.roll.self.get()
		switch {
		case inst == self.Instance:
		case created:
			l.watchInstance(inst, filepath.Join(l.roll.dir, name), v)
		case removed:
			l.drainPeerEvents() // a state sent before the Remove (Withdrawn) counts
			l.modeEvent(modeEvent{kind: evSocketRemoved, other: name})
		}
		return
	}
	if name == filepath.Base(l.roll.plain) && removed {
		if l.roll.plainEchoes > 0 { // our own unlink
			l.roll.plainEchoes--
			return
		}
		// A registrar without the mode (ours or node-driver-registrar) left,
		// or another instance's announcement there went: the kubelet
		// unregisters the driver.
		l.drainPeerEvents()
		l.modeEvent(modeEvent{kind: evPlainRemoved, other: name})
	}
}

// nextAnnouncement chooses the next announcement's version and path. The
// current socket stays served until the new one is confirmed (then it is
// retired), unless the kubelet never looked at it: that one is unlinked.
func (l *loop) nextAnnouncement() {
	self, _ := l.roll.self.get()
	v := uint64(l.r.clock.Now().UnixMilli())
	for _, s := range l.scan() {
		v = max(v, s.version+1)
	}
	v = max(v, self.Version+1)
	l.sock.path = filepath.Join(l.roll.dir, csiplugin.RollingUpdateSocketName(l.driver.name, self.Instance, v))
	if l.roll.atPlain {
		l.sock.path = l.roll.plain
	}
	l.roll.self.update(func(st *InstanceState) { st.Version, st.Confirmed, st.Failed = v, false, false })
	l.roll.takeBack, l.roll.removedOnly, l.roll.plainLost = "", nil, false
	if l.sock.cur == nil {
		return
	}
	if l.sock.cur.unasked() {
		// Withdrawn once the next one listens (withdrawSuperseded): the
		// others then find this instance's later socket when the stream of
		// this one ends, instead of seeing it leave.
		l.roll.superseded = l.sock.cur
	} else {
		l.roll.previous = append(l.roll.previous, l.sock.cur)
	}
	l.sock.cur = nil
}

// withdrawSuperseded withdraws the unasked announcement the new one
// replaces, once the new one listens (or failed to).
func (m *rolling) withdrawSuperseded() {
	if m == nil || m.superseded == nil {
		return
	}
	m.l.withdrawUnasked(m.superseded, "superseded")
	m.superseded = nil
}

// withdrawUnasked unlinks by name an announcement socket the kubelet never
// asked (unasked closed its listener): the kubelet never registered it, so
// the Remove only takes the path out of its desired state, instead of a
// hidden name that it would redial until it restarts. The others are told
// first (Withdrawn), so that they do not take the registration back for it.
func (l *loop) withdrawUnasked(ss *servingSocket, why string) {
	name := filepath.Base(ss.sock.Path())
	if _, v, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, name); ok {
		l.roll.self.update(func(st *InstanceState) { st.Withdrawn = v })
	}
	removed := ss.stop()
	l.roll.unlinked(ss.sock.Path(), removed)
	l.log.Info("unlinked by name an announcement the kubelet never asked: it is not registered", "removed", name, "why", why,
		"outcome", map[bool]string{true: "removed", false: "gone"}[removed])
}

// rollNotify acts on the kubelet's verdict on the current announcement.
// A registration is recorded (Confirmed, ConfirmedAt) and published, also
// while this instance leaves: a newer instance confirmed before it then
// takes the registration back, and this one sees that successor.
func (l *loop) rollNotify(registered bool, kubeletErr string) {
	if !registered {
		l.modeEvent(modeEvent{kind: evRejected, detail: kubeletErr, validation: strings.Contains(kubeletErr, "plugin validation failed"),
			versionRefused: l.versionRefused(kubeletErr)})
		return
	}
	l.sock.backoff.reset()
	l.alarms.retryAt.stop()
	l.await(awaitNothing, 0)
	now := l.r.clock.Now().UnixMilli()
	before, _ := l.roll.self.get()
	self := l.roll.self.update(func(st *InstanceState) { st.Confirmed, st.ConfirmedAt, st.Failed = true, now, false })
	if before.Confirmed {
		// The same announcement registered again: the kubelet restarted.
		l.removeDeadAfterKubeletRestart()
	}
	msg := "kubelet confirmed the announcement"
	if self.Terminating {
		msg = "kubelet confirmed the announcement of this instance, which is leaving"
	}
	l.decision(decisionConfirmed, msg, "version", csiplugin.RollingUpdateVersion(self.Version))
	l.modeEvent(modeEvent{kind: evConfirmed})
}

// retirePrevious retires the earlier announcement sockets without
// unregistering the driver.
func (l *loop) retirePrevious(why string) {
	for _, ss := range l.roll.previous {
		path := ss.sock.Path()
		if ss.unasked() {
			l.withdrawUnasked(ss, why)
			continue
		}
		if ss.retire() {
			l.decision(decisionRetire, "retired an earlier announcement without unregistering", "retired", filepath.Base(path), "why", why)
		}
	}
	l.roll.previous = nil
}

// rollLeave enters the leaving stage (ctx ended): this instance says it
// is terminating and never announces again; it retires every socket if
// another instance was confirmed after it (checked live), waits up to
// successorWait for one while one may come, else unregisters. The loop
// keeps serving its events meanwhile (the kubelet's verdict on this
// instance's announcement still counts: the others decide on it; an
// instance that starts now is watched: either may be the one confirmed
// after this one).
func (l *loop) rollLeave() {
	if l.roll.leaving {
		return
	}
	l.roll.leaving = true
	l.roll.self.update(func(st *InstanceState) { st.Terminating = true })
	l.stopSessionAlarms()
	l.roll.leaveBy.set(successorWait)
	if l.sock.cur != nil && len(l.roll.previous) == 0 && l.sock.cur.unasked() {
		// The kubelet never asked it: it never will, and it can go by name;
		// then this instance holds nothing and leaves at once. (With earlier
		// sockets still served it stays: its stream is the one the others
		// watch, and its end would tell them this instance left while its
		// earlier socket may still hold the registration.)
		l.withdrawUnasked(l.sock.cur, "leaving")
		l.sock.cur = nil
	}
	l.drainPeerEvents()
	l.modeEvent(modeEvent{kind: evLeave})
}

// onSuccessorWaitOver: leaving, successorWait passed.
func (l *loop) onSuccessorWaitOver() {
	l.roll.leaveBy.stop()
	l.roll.waitOver = true
	l.modeEvent(modeEvent{kind: evSuccessorWaitOver})
}

// retireAndLeave leaves without unregistering: every socket is retired.
func (l *loop) retireAndLeave(v modeView, s step) {
	// Told before the sockets go: the successor need not announce again.
	l.roll.self.update(func(st *InstanceState) { st.Successor = s.other })
	if l.sock.cur != nil {
		l.roll.previous = append(l.roll.previous, l.sock.cur)
		l.sock.cur = nil
	}
	l.retirePrevious(s.reason)
	l.decision(decisionRetire, "left without unregistering", "successor", s.other, "successorVersion",
		csiplugin.RollingUpdateVersion(v.successorState.Version), "successorConfirmedAt", v.successorState.ConfirmedAt,
		"ourConfirmedAt", v.self.ConfirmedAt)
	l.rollEnd()
}

// unregisterAndLeave leaves by unlinking: the kubelet unregisters the
// driver; the last instance on the node also removes what dead instances
// left.
func (l *loop) unregisterAndLeave(s step) {
	for _, ss := range l.roll.previous {
		ss.stop()
	}
	l.roll.previous = nil
	if l.sock.cur != nil {
		l.closeSocket("exit")
	}
	l.decision(decisionUnregister, "left by unlinking: "+s.reason, "otherInstances", len(l.roll.peers))
	if s.cleanup {
		l.removeLeftovers()
	}
	l.rollEnd()
}

// rollEnd ends the mode's watches and files once the instance left.
func (l *loop) rollEnd() {
	self, _ := l.roll.self.get()
	os.Remove(filepath.Join(l.roll.dir, csiplugin.BirthFileName(l.driver.name, self.Instance)))
	l.roll.stop()
	l.roll.settle.stop()
	l.roll.discover.stop()
	l.roll.leaveBy.stop()
	l.roll.probe.stop()
	l.roll.stable.stop()
	go func(events <-chan peerEvent) { // unblock watches that are sending
		for range events {
		}
	}(l.roll.events)
	l.roll.watches.Wait()
	close(l.roll.events)
	l.roll.left = true
}

// drainPeerEvents applies the peer events already sent, until the
// instance left.
func (l *loop) drainPeerEvents() {
	for !l.roll.left {
		select {
		case ev := <-l.roll.events:
			l.onPeerEvent(ev)
		default:
			return
		}
	}
}

// confirmedSuccessor returns an instance the kubelet confirmed after self,
// checked live now (its socket answers with that state), and that state.
func (l *loop) confirmedSuccessor(self InstanceState) (string, InstanceState) {
	for inst, p := range l.roll.peers {
		if !(peerState{st: p.st, known: p.known}).eligible() || !p.st.Confirmed || p.st.ConfirmedAt <= self.ConfirmedAt {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), liveCheckTimeout)
		st, err := fetchState(ctx, p.path)
		cancel()
		if err != nil {
			l.log.Info("a successor did not answer the live check", "other", inst, "err", err)
			continue
		}
		if st.Confirmed && !st.Failed && !st.Terminating && st.ConfirmedAt > self.ConfirmedAt {
			return inst, st
		}
	}
	return "", InstanceState{}
}

// removeLeftovers removes the announcement sockets of dead instances
// (through hidden names) and the birth files of instances without a live
// socket: the driver is leaving the node.
func (l *loop) removeLeftovers() {
	entries, err := os.ReadDir(l.roll.dir)
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, e := range entries {
		inst, _, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, e.Name())
		if !ok {
			continue
		}
		removed, err := sockfile.RemoveDead(filepath.Join(l.roll.dir, e.Name()))
		switch {
		case removed:
			l.log.Info("removed a dead instance's socket", "removed", e.Name())
		case err != nil:
			live[inst] = true
		}
	}
	self, _ := l.roll.self.get()
	for _, e := range entries {
		inst, ok := csiplugin.ParseBirthFileName(l.driver.name, e.Name())
		if ok && inst != self.Instance && !live[inst] {
			if os.Remove(filepath.Join(l.roll.dir, e.Name())) == nil {
				l.log.Info("removed a dead instance's birth file", "removed", e.Name())
			}
		}
	}
}

// decision logs one decision of the mode with its evidence and counts it.
func (l *loop) decision(d, msg string, evidence ...any) {
	l.r.metrics.addDecision(d)
	l.log.Info(msg, append([]any{"decision", d}, evidence...)...)
}

// fetchState reads the state of the instance serving path once.
func fetchState(ctx context.Context, path string) (InstanceState, error) {
	conn, err := csiplugin.Dial(path, grpc.WithUserAgent(csiplugin.NotKubeletUserAgent+" (rolling update)"))
	if err != nil {
		return InstanceState{}, err
	}
	defer conn.Close()
	stream, err := openWatch(ctx, conn)
	if err != nil {
		return InstanceState{}, err
	}
	return recvState(stream)
}
