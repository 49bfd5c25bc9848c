package registrar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/grpcserve"
	"github.com/csi-registrar/csi-registrar/registrar/handoff"
)

// The handover (Options.Handover), in the manner of the kubelet's plugin
// manager: the desired state is "the kubelet's registration of the driver
// never changes while one instance of it runs on the node"; the actual
// state is the handoverLoop struct, owned by the one goroutine of run. The
// kubelet calls a registration socket only when a file event gives its
// path a new identity, and dials the endpoint it was given afresh for every
// call, so:
//
//   - one registration socket, <driver>-reg.sock, is bound once and its
//     listening descriptor passes from instance to instance over the
//     rendezvous socket (handoverRendezvous) in the driver socket's
//     directory, which the kubelet does not watch;
//   - the endpoint is the link csi-endpoint.sock in that directory, swapped
//     to the newest instance whose driver answers Probe, and back to
//     another's when that driver stops answering;
//   - a leaver with a peer closes its copy and drains; the last one waits
//     lastLeaverWait for a successor, then removes the socket and the link,
//     each only when it is its own.
//
// Every rule is one handler below; the table of outcomes is in
// docs/design.md, "The handover".
const (
	// handoverLink is the endpoint link's name, in the directory of the
	// driver's socket. Not csi.sock: drivers in upstream's layout listen
	// there and remove whatever they find.
	handoverLink = "csi-endpoint.sock"
	// handoverRendezvous and handoverLock live beside it; hidden names, so
	// that a driver listing its directory does not take them for its own.
	handoverRendezvous = ".csi-registrar-handover.sock"
	handoverLock       = ".csi-registrar-handover.lock"

	// lastLeaverWait is how long the last instance keeps the registration
	// after it was told to stop, for a successor to take it (a pod deleted
	// and replaced, a DaemonSet rolling with maxUnavailable). Within the
	// manifests' grace period of 10 s.
	lastLeaverWait = 5 * time.Second
	// overlapTick is how often, while two instances run (a rollout), each
	// checks its own driver and the driver the link points at: it bounds
	// how long the kubelet's calls go to a driver that stopped answering.
	overlapTick = time.Second
	// helloWait bounds the exchange of hellos with a peer.
	helloWait = 5 * time.Second
)

// instance is a rendezvous connection to another instance of the driver.
type instance struct {
	p      *handoff.Peer
	newer  bool   // it took the registration from this one
	driver string // its driver socket, a name in the link's directory
}

// instanceEvent is what the rendezvous acceptor and a peer's reader report: a
// peer that joined, a message (with a handed-over socket, if any), or the
// peer's end (err != nil).
type instanceEvent struct {
	from   *instance
	joined bool
	msg    handoff.Message
	reg    *handoff.Socket
	err    error
}

// offer is what the rendezvous acceptor answers a newcomer's hello with,
// without waiting for the loop (which may be waiting for the lock that the
// newcomer holds): the loop stores a new one at every change.
type offer struct {
	msg handoff.Message
	reg *handoff.Socket
}

// handoverLoop is the handover's whole state; only run's goroutine reads or
// writes it.
type handoverLoop struct {
	r       *Registrar
	drv     *driverClient
	watcher *fsnotify.Watcher
	log     *slog.Logger

	name, regPath string             // the driver's name and registration socket
	own           string             // this instance's driver socket, a name in link.Dir
	link          handoff.Link       // the endpoint the kubelet dials
	lock          *handoff.Lock      // orders rendezvous, link and leave between instances
	rvPath        string             // the rendezvous socket
	endpoint      string             // the link as the kubelet sees it (GetInfo's endpoint)
	peerEvents    chan instanceEvent // from the peers' readers and the rendezvous acceptor
	done          chan struct{}      // closed when the loop has ended: readers stop sending
	offer         atomic.Pointer[offer]

	reg     *handoff.Socket    // the registration socket, when held
	serving *grpcserve.Serving // serving reg
	server  *registrationServer
	rv      *handoff.Socket // the rendezvous, while this is the newest instance
	peers   map[*instance]bool

	foreign    bool   // another process serves the plain path: wait for it to leave
	yielded    bool   // another process replaced the socket this one held
	registered bool   // the kubelet confirmed (here, or at a peer, or before the handover)
	rejected   string // the kubelet's last error
	driverOK   bool

	// retry re-announces the socket after a rejection that the kubelet
	// does not retry by itself (1.34, 1.35); retryBackoff spaces them.
	retry        *time.Timer
	retryBackoff *backoff
}

// runHandover is Run with Options.Handover: it returns nil when ctx ends
// and this instance has left.
func (r *Registrar) runHandover(ctx context.Context, drv *driverClient, watcher *fsnotify.Watcher) error {
	dir := filepath.Dir(r.driverPath)
	h := &handoverLoop{
		r: r, drv: drv, watcher: watcher, log: r.log,
		own:        filepath.Base(r.driverPath),
		link:       handoff.Link{Dir: dir, Name: handoverLink},
		lock:       handoff.NewLock(filepath.Join(dir, handoverLock)),
		rvPath:     filepath.Join(dir, handoverRendezvous),
		endpoint:   filepath.Join(filepath.Dir(r.opts.KubeletRegistrationPath), handoverLink),
		peerEvents: make(chan instanceEvent, 8),
		done:       make(chan struct{}),
		peers:      map[*instance]bool{},
	}
	h.retryBackoff = newBackoff(kubeletRetryProbe, r.opts.RegistrationRetryMax)
	h.offer.Store(&offer{})
	defer close(h.done)
	defer h.closeAll()
	if err := h.waitForDriver(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := watcher.Add(r.opts.PluginRegistrationPath); err != nil {
		return &OptionError{Option: OptionPluginRegistrationPath, Value: r.opts.PluginRegistrationPath, Op: "watch",
			Err: err, Fix: "mount the kubelet's plugins_registry there"}
	}
	if err := h.lock.Do(h.join); err != nil {
		return err
	}
	h.checkLink(ctx)
	h.publish()
	return h.loop(ctx)
}

// waitForDriver learns the driver's name once it answers Probe.
func (h *handoverLoop) waitForDriver(ctx context.Context) error {
	h.r.status.update(func(st *Status) {
		st.Stage, st.Detail, st.Since = StageWaitingForDriver, "connecting to "+h.r.driverPath, h.r.clock.Now()
	})
	var deadline <-chan time.Time
	if d := h.r.opts.ConnectionTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	wait := newBackoff(10*time.Millisecond, time.Second)
	for {
		name, path, err := h.r.identify(ctx, h.drv)
		if err == nil {
			h.name, h.regPath, h.driverOK = name, path, true
			h.log = h.log.With("driver", name, "socket", path)
			return nil
		}
		if !retryable(err) {
			return err
		}
		t := time.NewTimer(wait.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-deadline:
			t.Stop()
			return &OptionError{Option: OptionConnectionTimeout, Value: h.r.opts.ConnectionTimeout.String(),
				Err: &DriverTimeoutError{Address: h.r.driverPath, Waited: h.r.opts.ConnectionTimeout, Err: err},
				Fix: "check that the driver's container runs and listens there, or allow a longer wait"}
		case reply := <-h.r.ping:
			t.Stop()
			close(reply)
		case <-t.C:
		}
	}
}

// join, under the lock, takes the registration: from the newest running
// instance over the rendezvous if there is one, else by binding the plain
// path (free, or a dead socket), else waits for the process that serves it.
// Then it becomes the rendezvous for the next instance.
func (h *handoverLoop) join() error {
	if p, err := handoff.Dial(h.rvPath); err == nil {
		if err := h.greet(p, false); err != nil {
			h.log.Info("the newest instance's rendezvous did not hand over; taking the path myself", "err", err)
		}
	}
	if h.reg == nil && !h.foreign {
		h.bindPath()
	}
	rv, err := handoff.BindOver("unixpacket", h.rvPath)
	if err != nil {
		return fmt.Errorf("listen on the handover rendezvous %s: %w", h.rvPath, err)
	}
	h.rv = rv
	go h.accept(rv)
	return nil
}

// greet exchanges hellos with p: a newer instance (rejoin false) sends its
// driver and receives the older one's state and, when it holds one, the
// registration socket; an instance whose newer peers all left (rejoin true)
// joins the newest as an older peer.
func (h *handoverLoop) greet(p *handoff.Peer, rejoin bool) error {
	if err := p.Send(handoff.Message{Driver: h.own, Rejoin: rejoin, Registered: rejoin && h.registered}, nil); err != nil {
		p.Close()
		return err
	}
	p.SetDeadline(time.Now().Add(helloWait))
	m, reg, err := p.Recv()
	p.SetDeadline(time.Time{})
	if err != nil {
		p.Close()
		return err
	}
	pe := &instance{p: p, newer: rejoin, driver: m.Driver}
	h.peers[pe] = true
	go h.read(pe)
	if rejoin {
		if reg != nil {
			reg.Close() // this instance has its own copy
		}
		return nil
	}
	h.registered, h.rejected, h.foreign = m.Registered, m.Rejected, m.Foreign
	if reg != nil {
		h.serve(reg)
		h.log.Info("took the registration socket over from the running instance", "from", m.Driver, "registered", m.Registered)
	} else {
		h.log.Info("joined the running instance, which holds no registration socket", "from", m.Driver, "foreign", m.Foreign)
	}
	return nil
}

// bindPath binds the plain path when it is free or holds a dead socket, and
// no live announcement of the rolling-update mode holds the driver.
func (h *handoverLoop) bindPath() {
	if a := h.liveAnnouncement(); a != "" {
		if !h.foreign {
			h.log.Info("the rolling-update mode's instance holds the registration: taking it when that instance leaves", "announcement", a)
		}
		h.foreign = true
		return
	}
	// The kubelet may call the socket the moment it exists: the endpoint it
	// will be told must already reach a driver.
	h.ensureLink()
	reg, replaced, err := handoff.Bind("unix", h.regPath)
	switch {
	case err == nil:
		h.foreign = false
		h.registered, h.rejected = false, ""
		h.serve(reg)
		h.log.Info("serving the registration socket", "replacedDead", replaced)
		h.sendAll(handoff.Message{Driver: h.own}, reg)
	case errors.Is(err, handoff.ErrLive):
		if !h.foreign {
			h.log.Info("another registrar serves the registration socket: taking it when it leaves")
		}
		h.foreign = true
	default:
		h.foreign = false
		h.log.Error("cannot serve the registration socket", "err", err)
		h.r.status.update(func(st *Status) { st.Detail = err.Error() })
	}
}

// serve starts the registration server on reg, ending the one before.
func (h *handoverLoop) serve(reg *handoff.Socket) {
	h.stopServing()
	h.reg, h.yielded = reg, false
	h.server = newRegistrationServer(h.name, h.endpoint, plainVersion, serverHooks{})
	g := grpcserve.NewServer(grpc.ReadBufferSize(4096), grpc.WriteBufferSize(4096))
	registerapi.RegisterRegistrationServer(g, h.server)
	h.serving = grpcserve.Serve(g, reg)
}

// stopServing closes this instance's copy of the registration socket (the
// file stays) and lets calls under way finish.
func (h *handoverLoop) stopServing() {
	if h.reg == nil {
		return
	}
	h.reg.Close()
	h.serving.Stop(h.r.opts.ShutdownTimeout)
	h.reg, h.serving, h.server = nil, nil, nil
}

// accept answers each instance that dials the rendezvous with the current
// offer (the registration socket, when held), and hands it to the loop.
func (h *handoverLoop) accept(rv *handoff.Socket) {
	for {
		p, err := handoff.Accept(rv)
		if err != nil {
			return // closed
		}
		p.SetDeadline(time.Now().Add(helloWait))
		m, reg, err := p.Recv()
		if reg != nil {
			reg.Close()
		}
		if err == nil {
			o := h.offer.Load()
			err = p.Send(o.msg, o.reg)
		}
		p.SetDeadline(time.Time{})
		if err != nil {
			p.Close()
			continue
		}
		pe := &instance{p: p, newer: !m.Rejoin, driver: m.Driver}
		if !h.report(instanceEvent{from: pe, joined: true}) {
			p.Close()
			return
		}
	}
}

// read reports pe's messages, and its end, to the loop.
func (h *handoverLoop) read(pe *instance) {
	for {
		m, reg, err := pe.p.Recv()
		if !h.report(instanceEvent{from: pe, msg: m, reg: reg, err: err}) {
			if reg != nil {
				reg.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// report sends ev to the loop, or reports false when the loop has ended.
func (h *handoverLoop) report(ev instanceEvent) bool {
	select {
	case h.peerEvents <- ev:
		return true
	case <-h.done:
		return false
	}
}

// loop is the control loop proper.
func (h *handoverLoop) loop(ctx context.Context) error {
	tick := time.NewTimer(overlapTick)
	defer tick.Stop()
	for {
		// The tick runs only while another instance, or another
		// registrar, is around: alone, an idle registrar never wakes.
		var tickC <-chan time.Time
		if len(h.peers) > 0 || h.foreign {
			tickC = tick.C
		}
		select {
		case <-ctx.Done():
			return h.leave()
		case reply := <-h.r.ping:
			close(reply)
		case ev := <-h.peerEvents:
			h.onPeer(ev)
		case <-h.signalC():
			h.onKubelet()
		case <-h.retryC():
			h.onRetryDue()
		case ev := <-h.watcher.Events:
			h.onFile(ctx, ev)
		case err := <-h.watcher.Errors:
			h.log.Info("file watcher error; looking again", "err", err)
			h.onFile(ctx, fsnotify.Event{Name: h.regPath})
		case <-tickC:
			if h.foreign { // a lost file event costs one tick
				h.lock.Do(func() error { h.bindPath(); return nil })
			}
			h.checkLink(ctx)
			tick.Reset(overlapTick)
		}
		h.publish()
	}
}

// onPeer handles a new peer, a peer's message, or its end.
func (h *handoverLoop) onPeer(ev instanceEvent) {
	pe := ev.from
	switch {
	case ev.joined: // a newcomer dialed the rendezvous and was answered
		h.peers[pe] = true
		go h.read(pe)
		if pe.newer {
			// The newcomer is the rendezvous now.
			h.closeRendezvous()
			h.log.Info("handed the registration over to a newer instance", "to", pe.driver)
		}
	case ev.err != nil:
		delete(h.peers, pe)
		pe.p.Close()
		h.log.Info("a peer instance left", "peer", pe.driver)
		if pe.newer && h.rv == nil && !h.hasNewer() {
			h.lock.Do(h.rejoin)
		}
	default:
		m := ev.msg
		if m.Driver != "" {
			pe.driver = m.Driver
		}
		if ev.reg != nil { // a re-announced socket: serve that one
			h.serve(ev.reg)
			h.foreign = false
		}
		if m.Registered != h.registered || m.Rejected != h.rejected {
			h.registered, h.rejected = m.Registered, m.Rejected
			h.sendAll(h.state(), nil, pe)
		}
	}
}

// rejoin, under the lock, after this instance's newer peers all left: it
// joins the newest instance still running, or becomes the rendezvous.
func (h *handoverLoop) rejoin() error {
	if p, err := handoff.Dial(h.rvPath); err == nil {
		if err := h.greet(p, true); err == nil {
			return nil
		}
	}
	rv, err := handoff.BindOver("unixpacket", h.rvPath)
	if err != nil {
		h.log.Error("cannot listen on the handover rendezvous", "err", err)
		return err
	}
	h.rv = rv
	go h.accept(rv)
	h.log.Info("the newer instances left: this one is the newest again")
	return nil
}

func (h *handoverLoop) hasNewer() bool {
	for pe := range h.peers {
		if pe.newer {
			return true
		}
	}
	return false
}

// onKubelet records the kubelet's verdict and tells the peers.
func (h *handoverLoop) onKubelet() {
	_, last := h.server.snapshot()
	if last == nil {
		return
	}
	registered, rejected := last.PluginRegistered, last.Error
	if registered == h.registered && rejected == h.rejected {
		return
	}
	h.registered, h.rejected = registered, rejected
	if registered {
		h.log.Info("the kubelet confirmed the registration")
		h.retryBackoff.reset()
		h.stopRetry()
	} else {
		wait := h.retryBackoff.next()
		h.log.Info("the kubelet rejected the registration: registering again unless it retries by itself", "err", rejected, "after", wait)
		h.stopRetry()
		h.retry = time.NewTimer(wait)
	}
	h.sendAll(h.state(), nil)
}

func (h *handoverLoop) stopRetry() {
	if h.retry != nil {
		h.retry.Stop()
		h.retry = nil
	}
}

func (h *handoverLoop) retryC() <-chan time.Time {
	if h.retry == nil {
		return nil
	}
	return h.retry.C
}

// onRetryDue re-announces the socket when the kubelet's last word is still
// a rejection: a kubelet that retries by itself (1.36+) has confirmed by
// now, or called again; one that does not needs a new identity.
func (h *handoverLoop) onRetryDue() {
	h.retry = nil
	if h.registered || h.rejected == "" || h.reg == nil || h.server.registering() {
		return
	}
	h.log.Info("registering again after the kubelet's rejection")
	h.lock.Do(h.reannounce)
}

// onFile looks at the registration socket's path after an event in its
// directory (or the driver's).
func (h *handoverLoop) onFile(ctx context.Context, ev fsnotify.Event) {
	if filepath.Dir(ev.Name) == h.link.Dir && filepath.Base(ev.Name) == h.own {
		h.checkLink(ctx)
		return
	}
	if ev.Name != h.regPath {
		if h.foreign && h.reg == nil && h.isAnnouncement(ev.Name) {
			h.lock.Do(func() error { h.bindPath(); return nil })
		}
		return
	}
	switch {
	case h.foreign:
		h.lock.Do(func() error { h.bindPath(); return nil })
	case h.reg != nil && !h.reg.Owns(h.regPath):
		if handoff.Alive("unix", h.regPath) {
			// node-driver-registrar (a rollback) or an operator replaced it.
			h.log.Info("another registrar replaced the registration socket: leaving it alone")
			h.stopServing()
			h.yielded = true
			return
		}
		h.log.Info("the registration socket was removed: serving a new one")
		h.lock.Do(func() error { h.bindPath(); return nil })
	}
}

// checkLink points the endpoint link at this instance's driver when this is
// the newest instance and its driver answers, or when the driver the link
// points at stopped answering and this one answers (the fallback). Before
// taking the link from a driver that answers, it compares their
// NodeGetInfo: when they differ, the kubelet must register the driver again
// to learn the new values, so the socket is re-announced once.
func (h *handoverLoop) checkLink(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*h.r.opts.Timeout)
	defer cancel()
	h.driverOK = h.drv.Probe(ctx) == nil
	if !h.driverOK {
		return
	}
	target, err := h.link.Target()
	if err != nil {
		h.log.Error("cannot read the endpoint link", "err", err)
		return
	}
	if target == h.own {
		return
	}
	other := filepath.Join(h.link.Dir, target)
	otherOK := target != "" && ProbeDriver(ctx, other, h.r.opts.Timeout) == nil
	if otherOK && h.rv == nil {
		return // a newer instance holds the link, and its driver answers
	}
	reannounce := false
	if otherOK {
		same, err := sameNodeInfo(ctx, h.r.driverPath, other, h.r.opts.Timeout)
		if err != nil {
			h.log.Info("cannot compare NodeGetInfo with the current driver; keeping the link", "err", err)
			return
		}
		reannounce = !same
	}
	err = h.lock.Do(func() error {
		if t, _ := h.link.Target(); t != target {
			return errLinkMoved
		}
		return h.link.Swap(h.own)
	})
	switch {
	case errors.Is(err, errLinkMoved):
		return
	case err != nil:
		h.log.Error("cannot swap the endpoint link", "err", err)
		return
	}
	h.log.Info("the endpoint link points at this instance's driver", "from", target, "fallback", !otherOK && target != "")
	if reannounce && h.reg != nil {
		h.log.Info("the driver's NodeGetInfo differs from the previous driver's: registering again once")
		h.lock.Do(h.reannounce)
	}
}

var errLinkMoved = errors.New("the endpoint link moved")

// ensureLink, under the lock, points the link at this instance's driver
// when there is no link or its driver does not answer.
func (h *handoverLoop) ensureLink() {
	target, err := h.link.Target()
	if err != nil || target == h.own {
		return
	}
	if target != "" {
		ctx, cancel := context.WithTimeout(context.Background(), h.r.opts.Timeout)
		ok := ProbeDriver(ctx, filepath.Join(h.link.Dir, target), h.r.opts.Timeout) == nil
		cancel()
		if ok {
			return
		}
	}
	if err := h.link.Swap(h.own); err != nil {
		h.log.Error("cannot create the endpoint link", "err", err)
		return
	}
	h.log.Info("the endpoint link points at this instance's driver", "from", target)
}

// isAnnouncement reports whether path is an announcement of the driver by
// the rolling-update mode without the handover.
func (h *handoverLoop) isAnnouncement(path string) bool {
	_, _, ok := csiplugin.ParseRollingUpdateSocketName(h.name, filepath.Base(path))
	return ok && filepath.Dir(path) == filepath.Dir(h.regPath)
}

// liveAnnouncement returns an announcement of the driver by the rolling-update
// mode without the handover that a process still serves ("" if none). The
// kubelet holds such a registration at a version (1.<ms>.0) that the plain
// path's cannot exceed, and its CSI handler refuses an equal or lower one
// while it is registered: so the plain path is bound only once the mode's
// last instance left (removing its announcement, which unregisters the
// driver), as after node-driver-registrar.
func (h *handoverLoop) liveAnnouncement() string {
	entries, err := os.ReadDir(filepath.Dir(h.regPath))
	if err != nil {
		return ""
	}
	for _, e := range entries {
		p := filepath.Join(filepath.Dir(h.regPath), e.Name())
		if h.isAnnouncement(p) && handoff.Alive("unix", p) {
			return e.Name()
		}
	}
	return ""
}

// reannounce makes the kubelet register the driver again: a fresh socket
// renamed over the path gives it a new identity (unregister, then
// register). The peers get the new socket too.
func (h *handoverLoop) reannounce() error {
	reg, err := handoff.BindOver("unix", h.regPath)
	if err != nil {
		h.log.Error("cannot re-announce the registration socket", "err", err)
		return err
	}
	h.registered, h.rejected = false, ""
	h.serve(reg)
	h.sendAll(h.state(), reg)
	return nil
}

// leave ends this instance: with a peer running, it moves the link to the
// peer's driver if it points here, and closes its copies; alone, it waits
// lastLeaverWait for a successor, then removes what is its own.
func (h *handoverLoop) leave() error {
	h.r.status.update(func(st *Status) { st.Detail = "leaving" })
	if len(h.peers) == 0 && h.rv != nil {
		h.awaitSuccessor()
	}
	err := h.lock.Do(func() error {
		if len(h.peers) > 0 {
			h.moveLinkToPeer()
			h.closeRendezvous()
			return nil
		}
		if h.reg != nil && h.reg.RemoveIfOwned(h.regPath) {
			h.log.Info("removed the registration socket: no instance of the driver is left on this node")
		}
		if removed, _ := h.link.RemoveIf(h.own); removed {
			h.log.Info("removed the endpoint link")
		}
		if h.rv != nil {
			h.rv.RemoveIfOwned(h.rvPath)
		}
		return nil
	})
	h.closeAll()
	return err
}

// awaitSuccessor waits, at most lastLeaverWait, for an instance to dial the
// rendezvous, and hands over to it.
func (h *handoverLoop) awaitSuccessor() {
	t := time.NewTimer(lastLeaverWait)
	defer t.Stop()
	for len(h.peers) == 0 {
		select {
		case ev := <-h.peerEvents:
			h.onPeer(ev)
		case <-h.signalC():
			h.onKubelet()
		case reply := <-h.r.ping:
			close(reply)
		case <-t.C:
			return
		}
	}
}

func (h *handoverLoop) signalC() <-chan struct{} {
	if h.server == nil {
		return nil
	}
	return h.server.signal
}

// moveLinkToPeer points the link at a peer's driver that answers, when it
// points at this instance's.
func (h *handoverLoop) moveLinkToPeer() {
	if t, _ := h.link.Target(); t != h.own {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*h.r.opts.Timeout)
	defer cancel()
	for pe := range h.peers {
		if pe.driver == "" || ProbeDriver(ctx, filepath.Join(h.link.Dir, pe.driver), h.r.opts.Timeout) != nil {
			continue
		}
		if err := h.link.Swap(pe.driver); err == nil {
			h.log.Info("the endpoint link points at the remaining instance's driver", "to", pe.driver)
			return
		}
	}
	h.log.Info("no remaining instance's driver answers: the endpoint link keeps pointing here")
}

func (h *handoverLoop) closeRendezvous() {
	if h.rv != nil {
		h.rv.Close()
		h.rv = nil
	}
}

// closeAll ends serving, the rendezvous and the peers' connections.
func (h *handoverLoop) closeAll() {
	h.stopRetry()
	h.stopServing()
	h.closeRendezvous()
	for pe := range h.peers {
		pe.p.Close()
		delete(h.peers, pe)
	}
}

// state is this instance's part of a message.
func (h *handoverLoop) state() handoff.Message {
	return handoff.Message{Driver: h.own, Registered: h.registered, Rejected: h.rejected, Foreign: h.foreign}
}

// sendAll sends m (with reg's descriptor when not nil) to every peer but skip.
func (h *handoverLoop) sendAll(m handoff.Message, reg *handoff.Socket, skip ...*instance) {
	for pe := range h.peers {
		if len(skip) > 0 && skip[0] == pe {
			continue
		}
		if err := pe.p.Send(m, reg); err != nil {
			h.log.Info("cannot reach a peer instance", "peer", pe.driver, "err", err)
		}
	}
}

// publish writes the Status the stage and detail follow from.
func (h *handoverLoop) publish() {
	stage, detail, fallback := StageWaitingForKubelet, "", false
	switch {
	case h.foreign:
		stage, fallback = StageStandingBy, h.driverOK
		detail = "another registrar holds the driver's registration; taking it over when it leaves"
	case h.yielded:
		stage, detail = StageStandingBy, "another registrar replaced "+h.regPath
	case h.reg == nil:
		stage, detail = StageSocketError, "no registration socket"
	case h.registered:
		stage = StageRegistered
	case h.rejected != "":
		stage, detail = StageRejected, h.rejected
	}
	h.offer.Store(&offer{msg: h.state(), reg: h.reg})
	now := h.r.clock.Now()
	h.r.status.update(func(st *Status) {
		if st.Stage != stage {
			st.Since = now
		}
		st.Stage, st.Detail, st.Fallback = stage, detail, fallback
		st.DriverName, st.SocketPath = h.name, h.regPath
	})
}
