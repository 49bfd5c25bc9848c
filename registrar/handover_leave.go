package registrar

import "time"

// Leaving: to a peer, or alone after the wait for a successor.

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
