package registrar

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

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
	// holderGrace is how much longer than lastLeaverWait a leaver without the
	// rendezvous waits for the leaving peer that holds it to finish: the
	// holder's own wait, its clean-up and its exit (awaitHolder).
	holderGrace = 2 * time.Second
	// overlapTick is how often, while two instances run (a rollout), each
	// checks its own driver and the driver the link points at: it bounds
	// how long the kubelet's calls go to a driver that stopped answering.
	overlapTick = time.Second
	// helloWait bounds the exchange of hellos with a peer.
	helloWait = 5 * time.Second
)

// instance is a rendezvous connection to another instance of the driver.
type instance struct {
	p       *handoff.Peer
	leaving bool   // it said it stops
	staying bool   // it answered that it keeps running
	newer   bool   // it took the registration from this one
	driver  string // its driver socket, a name in the link's directory
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
	leaving    bool // told to stop: leave runs

	// retry re-announces the socket after a rejection that the kubelet
	// does not retry by itself (1.34, 1.35); retryBackoff spaces them.
	retry        *time.Timer
	retryBackoff *backoff
	// unheard runs while this instance serves the registration socket with
	// no word from the kubelet on it: at Options.KubeletWait it registers
	// again (onUnheard), so that a confirmation lost in a handover (it went
	// to an instance that had already passed its state on) cannot leave the
	// driver's pods unready for good.
	unheard *time.Timer
}

// runHandover is Run with Options.RollingUpdate: it returns nil when ctx ends
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

// serve starts the registration server on reg, ending the one before.
func (h *handoverLoop) serve(reg *handoff.Socket) {
	h.stopServing()
	h.reg, h.yielded = reg, false
	h.server = newRegistrationServer(h.name, h.endpoint, serverHooks{})
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
		case req := <-h.r.reregister:
			h.onReregister(req)
		case ev := <-h.peerEvents:
			h.onPeer(ev)
		case <-h.signalC():
			h.onKubelet()
		case <-timerC(h.retry):
			h.onRetryDue()
		case <-timerC(h.unheard):
			h.onUnheard()
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
		h.watchUnheard()
		h.publish()
	}
}

// watchUnheard starts the unheard timer when this instance serves the
// registration socket without the kubelet's confirmation or rejection, and
// stops it otherwise.
func (h *handoverLoop) watchUnheard() {
	waiting := h.reg != nil && !h.registered && h.rejected == "" && !h.foreign && !h.yielded && !h.leaving
	switch {
	case waiting && h.unheard == nil:
		h.unheard = time.NewTimer(h.r.opts.KubeletWait)
	case !waiting && h.unheard != nil:
		h.unheard.Stop()
		h.unheard = nil
	}
}

// onUnheard registers again when the kubelet has said nothing on the
// socket for Options.KubeletWait: the kubelet calls a socket only when its
// file is new, so waiting longer cannot help. It costs one kubelet round.
func (h *handoverLoop) onUnheard() {
	h.unheard = nil
	if h.registered || h.rejected != "" || h.reg == nil || h.server.registering() {
		return
	}
	h.log.Info("no word from the kubelet on the registration socket: registering again", "waited", h.r.opts.KubeletWait)
	h.lock.Do(h.reannounce)
}

// timerC is t's channel, nil (never ready) without a timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// onPeer handles a new peer, a peer's message, or its end.
func (h *handoverLoop) onPeer(ev instanceEvent) {
	pe := ev.from
	switch {
	case ev.joined: // a newcomer dialed the rendezvous and was answered
		pe.staying = true // it runs: a newcomer, or an older one rejoining
		h.peers[pe] = true
		go h.read(pe)
		// The acceptor answered with the offer of the last loop round; a
		// kubelet verdict handled since then reached only the peers known
		// then. The newcomer gets the state as it is now.
		if err := pe.p.Send(h.state(), nil); err != nil {
			h.log.Info("cannot reach a peer instance", "peer", pe.driver, "err", err)
		}
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
	case ev.msg.Leaving:
		pe.leaving, pe.staying = true, false
		pe.p.Send(handoff.Message{Driver: h.own, Leaving: h.leaving, Staying: !h.leaving}, nil)
	case ev.msg.Staying:
		pe.staying = true
	default:
		m := ev.msg
		if m.Driver != "" {
			pe.driver = m.Driver
		}
		if ev.reg != nil { // a re-announced socket: serve that one
			h.serve(ev.reg)
			h.foreign = false
		}
		if !h.about(m) {
			h.log.Info("ignored a peer's word on the kubelet's verdict: it is about a registration socket since replaced", "peer", pe.driver)
			return
		}
		if m.Registered != h.registered || m.Rejected != h.rejected {
			h.registered, h.rejected = m.Registered, m.Rejected
			h.sendAll(h.state(), nil, pe)
		}
	}
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

func (h *handoverLoop) signalC() <-chan struct{} {
	if h.server == nil {
		return nil
	}
	return h.server.signal
}

// state is this instance's part of a message.
func (h *handoverLoop) state() handoff.Message {
	m := handoff.Message{Driver: h.own, Registered: h.registered, Rejected: h.rejected, Foreign: h.foreign}
	if h.reg != nil {
		m.About = h.reg.ID
	}
	return m
}

// about reports whether m's verdict is about the registration socket this
// instance serves. A verdict the sender sent before a re-announced socket
// reached it (the two messages crossed) is about the file replaced: the
// kubelet has said nothing yet on the new one. A message about no socket
// in particular (the sender holds none) counts.
func (h *handoverLoop) about(m handoff.Message) bool {
	return m.About == (handoff.FileID{}) || h.reg == nil || m.About == h.reg.ID
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
