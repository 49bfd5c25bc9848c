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
	h.sendAll(handoff.Message{Driver: h.own, Leaving: true}, nil)
	h.awaitAnswers()
	if len(h.staying()) == 0 {
		if h.rv == nil && len(h.peers) > 0 {
			h.log.Info("every instance of the driver on this node is stopping: the newest removes what remains")
			h.closeAll()
			return nil
		}
		h.awaitSuccessor()
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
	t := time.NewTimer(helloWait)
	defer t.Stop()
	for !h.allAnswered() {
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

func (h *handoverLoop) allAnswered() bool {
	for pe := range h.peers {
		if !pe.staying && !pe.leaving {
			return false
		}
	}
	return true
}

// awaitSuccessor waits, at most lastLeaverWait, for an instance to dial the
// rendezvous (it gets the socket as it joins).
func (h *handoverLoop) awaitSuccessor() {
	if h.rv == nil {
		return
	}
	t := time.NewTimer(lastLeaverWait)
	defer t.Stop()
	for len(h.staying()) == 0 {
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
