package registrar

import (
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/handoff"
)

// Leaving: to a peer, or alone after the wait for a successor.

// leave ends this instance. It tells its peers and waits for their answers
// (a peer may be stopping at the same moment: an uninstall stops them all).
// With a peer that stays, it moves the link to that peer's driver if it
// points here, and closes its copies. Otherwise the instance that holds the
// rendezvous waits lastLeaverWait for a successor, then removes the socket,
// the rendezvous and the link (if it names its driver or a leaving peer's),
// each only when it is its own; a leaver without the rendezvous leaves that
// to the one that holds it.
func (h *handoverLoop) leave() error {
	h.r.status.update(func(st *Status) { st.Detail = "leaving" })
	h.leaving = true
	successorBy := time.Now().Add(lastLeaverWait)
	h.askPeers()
	if len(h.staying()) == 0 && h.rv == nil {
		h.awaitHolder(successorBy.Add(holderGrace))
	}
	if len(h.staying()) == 0 {
		if h.rv == nil {
			h.log.Info("every instance of the driver on this node is stopping: the newest removes what remains")
			h.closeAll()
			return nil
		}
		h.awaitSuccessor(successorBy)
	}
	if len(h.staying()) > 0 {
		h.drain()
	}
	err := h.lock.Do(func() error {
		if staying := h.staying(); len(staying) > 0 {
			h.moveLinkTo(staying)
			h.closeRendezvous()
			return nil
		}
		if h.reg != nil && h.reg.RemoveIfOwned(h.regPath) {
			h.log.Info("removed the registration socket: no instance of the driver is left on this node")
		}
		targets := []string{h.own}
		for pe := range h.peers {
			targets = append(targets, pe.driver)
		}
		for _, t := range targets {
			if removed, _ := h.link.RemoveIf(t); removed {
				h.log.Info("removed the endpoint link", "target", t)
			}
		}
		if h.rv != nil {
			h.rv.RemoveIfOwned(h.rvPath)
		}
		return nil
	})
	h.closeAll()
	return err
}

// askPeers tells every peer that this instance leaves and waits for their
// answers.
func (h *handoverLoop) askPeers() {
	h.sendAll(handoff.Message{Driver: h.own, Leaving: true}, nil)
	h.awaitAnswers()
}

// awaitHolder runs when this instance leaves without the rendezvous and no
// peer stays. The holder, a leaving peer, removes what remains after its wait
// for a successor; but it may have gone already, counting on this instance,
// which answered that it stays before it was told to stop itself (an
// uninstall stops every pod at once). So it waits, until deadline, for the
// leaving peers to go: when the newest goes, this instance takes the
// rendezvous (onPeer), and with it the clean-up. With no peer left and the
// rendezvous still not its own, it takes it here, or joins (and asks) the
// instance that holds it now.
func (h *handoverLoop) awaitHolder(deadline time.Time) {
	h.leaveWait(deadline, func() bool { return h.rv != nil || len(h.staying()) > 0 || len(h.peers) == 0 })
	if h.rv == nil && len(h.peers) == 0 {
		h.lock.Do(h.rejoin)
		if len(h.peers) > 0 {
			h.askPeers()
		}
	}
}

// staying lists the peers that answered that they keep running.
func (h *handoverLoop) staying() []*instance {
	var out []*instance
	for pe := range h.peers {
		if pe.staying && !pe.leaving {
			out = append(out, pe)
		}
	}
	return out
}

// awaitAnswers waits, at most helloWait, until every peer answered the
// leave (staying or leaving) or is gone.
func (h *handoverLoop) awaitAnswers() {
	h.leaveWait(time.Now().Add(helloWait), h.allAnswered)
}

func (h *handoverLoop) allAnswered() bool {
	for pe := range h.peers {
		if !pe.staying && !pe.leaving {
			return false
		}
	}
	return true
}

// awaitSuccessor waits, until deadline (lastLeaverWait after the leave
// began, so that taking the rendezvous over from a peer that left first adds
// no second wait), for an instance to dial the rendezvous (it gets the socket
// as it joins).
func (h *handoverLoop) awaitSuccessor(deadline time.Time) {
	if h.rv == nil {
		return
	}
	h.leaveWait(deadline, func() bool { return len(h.staying()) > 0 })
}

// leaveWait is the control loop while leaving: it handles the peers' events,
// the kubelet's verdicts and pings until done reports true or deadline
// passes.
func (h *handoverLoop) leaveWait(deadline time.Time, done func() bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for !done() {
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

func (h *handoverLoop) closeRendezvous() {
	if h.rv != nil {
		h.rv.Close()
		h.rv = nil
	}
}

// drain stops this instance serving the registration socket (its copy of
// the descriptor closes; the file stays, and so do the peers' copies), lets
// the calls under way finish, and passes the kubelet's verdict from them on
// to the peers: a NotifyRegistrationStatus that reaches a leaver is the only
// word the kubelet says on that socket.
func (h *handoverLoop) drain() {
	if h.reg == nil {
		return
	}
	h.reg.Close()
	h.serving.Stop(h.r.opts.ShutdownTimeout)
	h.onKubelet()
	h.reg, h.serving, h.server = nil, nil, nil
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
