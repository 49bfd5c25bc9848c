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

	"github.com/fsnotify/fsnotify"
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
//   - Whenever another instance leaves, dies, fails, or was confirmed by
//     the kubelet after this one, the newest instance announces again: the
//     survivor has the last word. After a Remove by name (the kubelet
//     unregisters the driver) or a failure (the CSI handler unregistered
//     it), it waits kubeletSettle first, so that the kubelet's own
//     deregistration cannot undo the new registration.
//   - A rejection in the kubelet's validation is not a registration: the
//     socket is unlinked by name (the kubelet would retry it forever) and is
//     not taken as evidence of the kubelet's own retries.
//   - A terminating instance never announces.
const (
	// kubeletSettle is how long an announcement waits after a Remove of a
	// registered socket, or a failed registration, of another instance: the
	// kubelet's reconciler runs every second and unregisters the driver in
	// its next round; 3 rounds of margin for a busy node.
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
	decisionTakeBack, decisionStandBy, decisionWithdraw}

// reasonTakeBack is the socket creation reason of an announcement that
// takes the registration back.
const reasonTakeBack = "take-back"

// rolling is the mode's part of the loop's state.
type rolling struct {
	dir      string // the registration directory
	self     *handoverServer
	previous []*servingSocket // earlier announcements, retired once the latest is confirmed
	peers    map[string]*peer // the other instances of the driver, by instance
	events   chan peerEvent
	stop     context.CancelFunc // ends the watches
	watchCtx context.Context
	watches  sync.WaitGroup
	// takeBack: announce again when allowed; why is the evidence.
	takeBack bool
	why      string
	settle   alarm // no announcement before it fires
	discover alarm // at start: the peers' first states are awaited
}

// peer is another instance of the driver, watched through its latest socket.
type peer struct {
	path    string
	version uint64
	st      InstanceState
	known   bool // a state arrived
	cancel  context.CancelFunc
}

// eligible reports whether the peer may hold the registration.
func (p *peer) eligible() bool { return p.known && !p.st.Terminating && !p.st.Failed }

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
		dir:      dir,
		self:     newHandoverServer(InstanceState{Driver: l.driver.name, Instance: inst, Birth: birth}),
		peers:    map[string]*peer{},
		events:   make(chan peerEvent),
		stop:     stop,
		watchCtx: ctx,
		settle:   newAlarm(l.r.clock),
		discover: newAlarm(l.r.clock),
	}
	l.r.metrics.enableRollingUpdate()
	l.log = l.log.With("instance", inst)
	l.log.Info("rolling-update mode", "birth", time.UnixMilli(birth).UTC().Format(time.RFC3339Nano), "podUID", l.r.opts.RollingUpdate)
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
	l.decide()
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
	return out
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
		watchPeer(ctx, path, l.roll.events)
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
		for name, s := range l.scan() {
			if s.instance == inst && s.version > p.version {
				l.watchInstance(inst, filepath.Join(l.roll.dir, name), s.version)
				l.roll.peers[inst].st, l.roll.peers[inst].known = p.st, p.known
				l.decide()
				return
			}
		}
		if !p.known {
			// It never answered: a dead instance's socket, not one that
			// left. Nothing changed for the kubelet.
			l.log.Info("another instance's socket does not answer", "other", inst, "socket", filepath.Base(p.path), "err", ev.err)
			if l.roll.discover.armed() && l.allKnown() {
				l.roll.discover.stop()
			}
			l.decide()
			return
		}
		l.log.Info("another instance left", "other", inst, "lastState", p.st, "err", ev.err)
		l.wantTakeBack("instance " + inst + " left")
		l.decide()
		return
	}
	old := p.st
	p.st, p.known = ev.st, true
	self, _ := l.roll.self.get()
	switch {
	case ev.st.Failed && !old.Failed:
		l.log.Info("the kubelet failed another instance's registration", "other", inst, "version", ev.st.Version)
		l.roll.settle.set(kubeletSettle) // the CSI handler unregistered the driver: let that pass first
		l.wantTakeBack("instance " + inst + " failed")
	case ev.st.Terminating && !old.Terminating && ev.st.NewerThan(self):
		// It will leave; be confirmed after it, so that it can leave
		// without unregistering the driver.
		l.wantTakeBack("newer instance " + inst + " is terminating")
	case self.Version > 0 && ev.st.ConfirmedAt != old.ConfirmedAt && mayBeConfirmedAfter(ev.st, self) &&
		(!ev.st.NewerThan(self) || ev.st.Terminating):
		// The kubelet registered an instance that should not hold the
		// registration (an older one, or one that is leaving) after this one.
		l.wantTakeBack("the kubelet confirmed instance " + inst + " (older, or leaving) after this one")
	}
	if l.roll.discover.armed() && l.allKnown() {
		l.roll.discover.stop()
	}
	l.decide()
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

func (l *loop) allKnown() bool {
	for _, p := range l.roll.peers {
		if !p.known {
			return false
		}
	}
	return true
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
			// Unlinked by name: the kubelet unregisters the driver.
			l.roll.settle.set(kubeletSettle)
			l.wantTakeBack("socket " + name + " of instance " + inst + " was removed")
			l.decide()
		}
		return
	}
	if name == l.driver.name+csiplugin.RegistrationSocketSuffix && removed {
		// A registrar without the mode (ours or node-driver-registrar) left:
		// the kubelet unregisters the driver.
		l.roll.settle.set(kubeletSettle)
		l.wantTakeBack("socket " + name + " (a registrar without the rolling-update mode) was removed")
		l.decide()
	}
}

func (l *loop) wantTakeBack(why string) {
	l.roll.takeBack, l.roll.why = true, why
}

// newerPeer returns the newest eligible instance newer than self, if any.
func (l *loop) newerPeer(self InstanceState) (string, *peer) {
	var inst string
	var best *peer
	for i, p := range l.roll.peers {
		if p.eligible() && p.st.NewerThan(self) && (best == nil || p.st.NewerThan(best.st)) {
			inst, best = i, p
		}
	}
	return inst, best
}

// othersEligible reports whether another instance may hold the registration.
func (l *loop) othersEligible() bool {
	for _, p := range l.roll.peers {
		if p.eligible() {
			return true
		}
	}
	return false
}

// decide is the mode's one decision, taken after every change: whether
// this instance announces now.
func (l *loop) decide() {
	self, _ := l.roll.self.get()
	if self.Terminating || l.roll.discover.armed() {
		return
	}
	if inst, p := l.newerPeer(self); p != nil {
		l.roll.takeBack = false
		if l.stage != StageStandingBy {
			l.decision(decisionStandBy, "a newer instance holds or takes the registration", "newer", inst,
				"newerBirth", p.st.Birth, "newerConfirmed", p.st.Confirmed)
			l.alarms.retryAt.stop()
			l.await(awaitNothing, 0)
			l.publish(StageStandingBy, "instance "+inst+" is newer and holds or takes the registration")
		}
		return
	}
	if self.Failed && l.othersEligible() {
		return // the kubelet failed ours while another holds it: no cycle of registrations
	}
	if l.roll.settle.armed() || l.alarms.retryAt.armed() && l.sock.cur == nil {
		return // announce when the alarm fires
	}
	switch {
	case l.roll.takeBack:
		l.decision(decisionTakeBack, "announcing again: the last announcement on the node must be this instance's", "why", l.roll.why)
		l.create(reasonTakeBack)
	case l.sock.cur == nil:
		l.create(reasonStart)
	case l.stage == StageStandingBy:
		l.publish(StageWaitingForKubelet, "the newer instance left; waiting for the kubelet")
		l.create(reasonTakeBack)
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
	l.roll.self.update(func(st *InstanceState) { st.Version, st.Confirmed, st.Failed = v, false, false })
	l.roll.takeBack = false
	if l.sock.cur == nil {
		return
	}
	if l.sock.getInfos == 0 {
		l.closeSocket("superseded") // the kubelet never looked at it: not registered
		return
	}
	l.roll.previous = append(l.roll.previous, l.sock.cur)
	l.sock.cur = nil
}

// rollNotify acts on the kubelet's verdict on the current announcement.
func (l *loop) rollNotify(registered bool, kubeletErr string) {
	if registered {
		l.sock.backoff.reset()
		l.alarms.retryAt.stop()
		l.await(awaitNothing, 0)
		now := l.r.clock.Now().UnixMilli()
		self := l.roll.self.update(func(st *InstanceState) { st.Confirmed, st.ConfirmedAt, st.Failed = true, now, false })
		l.decision(decisionConfirmed, "kubelet confirmed the announcement", "version", csiplugin.RollingUpdateVersion(self.Version))
		l.retirePrevious("a later announcement of this instance is confirmed")
		if _, p := l.newerPeer(self); p != nil {
			l.decide() // the kubelet re-registered this older instance (it restarted): the newer one takes back
			return
		}
		l.publish(StageRegistered, "")
		return
	}
	validation := strings.Contains(kubeletErr, "plugin validation failed")
	l.decision(decisionWithdraw, "kubelet rejected the announcement; unlinking it, which the kubelet does not count as registered",
		"kubeletError", kubeletErr, "inValidation", validation)
	if !validation {
		// Told before the socket goes, so that the others see a failure
		// (and wait for the kubelet's deregistration), not a departure.
		l.roll.self.update(func(st *InstanceState) { st.Failed = true })
	}
	l.closeSocket("rejected")
	l.await(awaitNothing, 0)
	if !validation {
		if l.othersEligible() {
			l.publish(StageRejected, kubeletErr+" (another instance remains and takes the registration back; this one does not retry: delete its pod to try again)")
			return
		}
	}
	d := l.scheduleRetry(reasonRejected)
	l.publish(StageRejected, kubeletErr+" (announcing again in "+short(d)+")")
}

// retirePrevious retires the earlier announcement sockets without
// unregistering the driver.
func (l *loop) retirePrevious(why string) {
	for _, ss := range l.roll.previous {
		path := ss.sock.Path()
		if ss.retire() {
			l.decision(decisionRetire, "retired an earlier announcement without unregistering", "retired", filepath.Base(path), "why", why)
		}
	}
	l.roll.previous = nil
}

// rollExit ends the mode: retire every socket if another instance was
// confirmed after this one (checked live), else unregister; the last
// instance on the node also removes what dead instances left.
func (l *loop) rollExit() {
	self := l.roll.self.update(func(st *InstanceState) { st.Terminating = true })
	l.drainPeerEvents()
	inst, succ := l.confirmedSuccessor(self)
	// Alone, this instance cannot tell a deleted pod, whose replacement the
	// DaemonSet controller starts at once (maxSurge), from an uninstall: it
	// waits as long for an instance to appear. Leaving at once would unlink
	// the socket while the replacement announces, and the kubelet would
	// unregister the one and register the other in the same round, racing on
	// the Node's annotation (seen on v1.37.2: the annotation key lost for
	// good while the CSINode entry stayed).
	if succ == nil && l.successorMayCome() {
		// Another instance may take the registration now that this one
		// says it is terminating: give it the time to be confirmed. Meanwhile
		// the kubelet's verdict on this instance's announcement still counts
		// (the others decide on it), and an instance that starts now is
		// watched: either may be the one confirmed after this one.
		wait := l.r.clock.NewTimer(successorWait)
		var signal <-chan struct{}
		if l.sock.cur != nil {
			signal = l.sock.cur.server.signal
		}
		files := l.watcher.Events
	waiting:
		for succ == nil && l.successorMayCome() {
			select {
			case ev := <-l.roll.events:
				l.onPeerEvent(ev)
			case <-signal:
				l.onExitNotify()
			case ev, ok := <-files:
				if !ok {
					files = nil
					continue
				}
				l.onExitFileEvent(ev)
			case <-wait.C():
				break waiting
			}
			self, _ = l.roll.self.get()
			inst, succ = l.confirmedSuccessor(self)
		}
		wait.Stop()
	}
	switch {
	case succ != nil:
		if l.sock.cur != nil {
			l.roll.previous = append(l.roll.previous, l.sock.cur)
			l.sock.cur = nil
		}
		l.retirePrevious("instance " + inst + " was confirmed by the kubelet after this one (checked live)")
		l.decision(decisionRetire, "left without unregistering", "successor", inst, "successorVersion",
			csiplugin.RollingUpdateVersion(succ.Version), "successorConfirmedAt", succ.ConfirmedAt, "ourConfirmedAt", self.ConfirmedAt)
	default:
		for _, ss := range l.roll.previous {
			ss.stop()
		}
		l.roll.previous = nil
		if l.sock.cur != nil {
			l.closeSocket("exit")
		}
		l.decision(decisionUnregister, "left by unlinking: no instance was confirmed after this one", "otherInstances", len(l.roll.peers))
		if !l.othersLive() {
			l.removeLeftovers()
		}
	}
	os.Remove(filepath.Join(l.roll.dir, csiplugin.BirthFileName(l.driver.name, self.Instance)))
	l.roll.stop()
	l.roll.settle.stop()
	l.roll.discover.stop()
	go func() { // unblock watches that are sending
		for range l.roll.events {
		}
	}()
	l.roll.watches.Wait()
	close(l.roll.events)
}

// successorMayCome reports whether an instance may yet be confirmed after
// this leaving one: another may hold the registration, or none is known at
// all (alone: a deleted pod's replacement may be starting).
func (l *loop) successorMayCome() bool { return len(l.roll.peers) == 0 || l.othersMayHold() }

// othersMayHold reports whether another instance may yet take the
// registration: one that is eligible, or one that has not answered yet (a
// pod that is starting; a dead instance's socket stops counting once its
// watch gives up, after firstStateWait).
func (l *loop) othersMayHold() bool {
	return l.othersEligible() || !l.allKnown()
}

// onExitNotify records the kubelet's verdict on the current announcement
// while this instance leaves: a registration the kubelet finished now is
// published (Confirmed, ConfirmedAt), so that a newer instance confirmed
// before it takes the registration back, and this instance then sees that
// successor. It never announces again.
func (l *loop) onExitNotify() {
	n, last := l.sock.cur.server.snapshot()
	l.sock.getInfos = n
	if last == nil || last == l.sock.handled {
		return
	}
	l.sock.handled = last
	if !last.PluginRegistered {
		return // not registered: the socket is unlinked at exit, which is safe
	}
	now := l.r.clock.Now().UnixMilli()
	self := l.roll.self.update(func(st *InstanceState) { st.Confirmed, st.ConfirmedAt, st.Failed = true, now, false })
	l.decision(decisionConfirmed, "kubelet confirmed the announcement of this instance, which is leaving", "version", csiplugin.RollingUpdateVersion(self.Version))
}

// onExitFileEvent watches an instance whose socket appears while this one
// leaves.
func (l *loop) onExitFileEvent(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	if filepath.Dir(name) != l.roll.dir || !ev.Has(fsnotify.Create) {
		return
	}
	inst, v, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, filepath.Base(name))
	if self, _ := l.roll.self.get(); ok && inst != self.Instance {
		l.watchInstance(inst, name, v)
	}
}

// drainPeerEvents applies the peer events already sent.
func (l *loop) drainPeerEvents() {
	for {
		select {
		case ev := <-l.roll.events:
			l.onPeerEvent(ev)
		default:
			return
		}
	}
}

// confirmedSuccessor returns an instance the kubelet confirmed after self,
// checked live now: its socket answers with that state.
func (l *loop) confirmedSuccessor(self InstanceState) (string, *InstanceState) {
	for inst, p := range l.roll.peers {
		if !p.eligible() || !p.st.Confirmed || p.st.ConfirmedAt <= self.ConfirmedAt {
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
			return inst, &st
		}
	}
	return "", nil
}

// othersLive reports whether another instance that is not ending answers.
func (l *loop) othersLive() bool {
	for _, p := range l.roll.peers {
		if p.known && !p.st.Terminating {
			return true
		}
	}
	return false
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
