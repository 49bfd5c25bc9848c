package registrar

import (
	"context"
	"errors"
	"path/filepath"
)

// The endpoint link: which instance's driver the kubelet's calls reach.

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

var errLinkMoved = errors.New("the endpoint link moved")
