package registrar

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/handoff"
)

// Taking the registration: from the running instance, or the plain path.

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
		// A newer instance that started while no rendezvous answered (the
		// newest one had left, this one had not rejoined yet) found the
		// path served and stands by; it gets this instance's copy.
		if m.Foreign && h.reg != nil {
			if err := p.Send(h.state(), h.reg); err != nil {
				h.log.Info("cannot hand the registration socket to the newest instance", "to", m.Driver, "err", err)
			} else {
				h.log.Info("handed the registration socket to the newest instance, which stood by", "to", m.Driver)
			}
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
// no live announcement of the previous release's rolling-update mode holds
// the driver.
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

// isAnnouncement reports whether path is an announcement of the driver by
// the previous release's rolling-update mode (before the handover).
func (h *handoverLoop) isAnnouncement(path string) bool {
	_, _, ok := csiplugin.ParseRollingUpdateSocketName(h.name, filepath.Base(path))
	return ok && filepath.Dir(path) == filepath.Dir(h.regPath)
}

// liveAnnouncement returns an announcement of the driver by the previous
// release's rolling-update mode that a process still serves ("" if none). The
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
