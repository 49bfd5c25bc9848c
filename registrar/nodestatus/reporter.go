package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// Source is the registrar a Reporter follows: *registrar.Registrar.
type Source interface {
	// WatchStatus returns the status and a channel closed at its next change.
	WatchStatus() (registrar.Status, <-chan struct{})
	// Reregister makes the kubelet register the driver again.
	Reregister(why string) error
}

// Reporter writes the registration's state to the API server: the Node
// condition, the removal of the startup taint, and a new registration when
// the API server lost the kubelet's record of it. Create it with New, run
// it with Run beside the registrar's Run, with the same context.
type Reporter struct {
	opts      Options
	c         *Client
	log       *slog.Logger
	heartbeat time.Duration
	now       func() time.Time
	lost      atomic.Pointer[string] // a loss that registering again did not heal; nil: none
}

// New checks opts and returns a Reporter. Without Options.Client it reads
// the in-cluster configuration (InClusterClient); nothing is sent before Run.
func New(opts Options) (*Reporter, error) {
	if !opts.Enabled() {
		return nil, errors.New("nodestatus: neither a Node condition nor a startup taint is set; create no Reporter")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	c := opts.Client
	if c == nil {
		var err error
		if c, err = InClusterClient(); err != nil {
			return nil, err
		}
	}
	log := opts.Logger.With("node", opts.NodeName)
	if opts.Condition != "" {
		log = log.With("condition", opts.Condition)
	}
	return &Reporter{opts: opts, c: c, log: log, heartbeat: opts.Heartbeat, now: time.Now}, nil
}

// ReadyCheck returns the loss of the registration's record that registering
// again did not heal, nil if there is none: registrar.Options.ReadyCheck.
func (r *Reporter) ReadyCheck() error {
	if p := r.lost.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}

// state is what the Reporter's loop knows; only Run's goroutine touches it.
type state struct {
	st       registrar.Status
	node     *Node    // the latest Node seen; nil until known or when absent
	csinode  *CSINode // the latest CSINode seen; nil when absent
	csiKnown bool     // csinode was looked at

	written   *Condition // the last condition this instance wrote, nil: none yet
	writtenAt time.Time
	heldTrue  bool      // the condition's True is this instance's (it wrote True last)
	waitStale time.Time // another instance's True goes stale then: write after it

	taintDone string // the UID of the Node whose startup taint is gone

	healedAt time.Time // Status.Since of the confirmation a new registration was asked for
	lost     string    // a loss not healed

	failures int       // API errors in a row
	retryAt  time.Time // after an API error: try again then
}

// Run follows src until ctx ends and returns nil then; it writes the
// condition, removes the taint and heals a lost registration as src's
// status and the Node and CSINode watched call for. API errors are logged
// and retried with a backoff (1 s doubling to 1 min).
func (r *Reporter) Run(ctx context.Context, src Source) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer r.c.Close()
	nodes, csinodes := make(chan *Node, 1), make(chan *CSINode, 1)
	wg.Add(2)
	go func() { defer wg.Done(); r.followNode(ctx, nodes) }()
	go func() { defer wg.Done(); r.followCSINode(ctx, csinodes) }()

	var s state
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	for {
		st, changed := src.WatchStatus()
		s.st = st
		next := r.step(ctx, src, &s)
		wake.Reset(max(next.Sub(r.now()), 0))
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case n := <-nodes:
			s.node = n
		case c := <-csinodes:
			s.csinode, s.csiKnown = c, true
		case <-wake.C:
		}
	}
}

// step does what the state calls for and returns when to look again
// without an event.
func (r *Reporter) step(ctx context.Context, src Source, s *state) time.Time {
	now := r.now()
	if now.Before(s.retryAt) {
		return s.retryAt
	}
	if err := r.act(ctx, src, s); err != nil {
		if ctx.Err() != nil {
			return now.Add(time.Hour)
		}
		s.failures++
		d := min(time.Second<<min(s.failures-1, 6), time.Minute)
		s.retryAt = now.Add(d)
		r.log.Warn("Node status not written; retrying", "err", err, "retryIn", d)
		return s.retryAt
	}
	s.failures, s.retryAt = 0, time.Time{}
	next := now.Add(time.Hour)
	if s.written != nil {
		next = s.writtenAt.Add(r.heartbeat)
	}
	if !s.waitStale.IsZero() && s.waitStale.Before(next) {
		next = s.waitStale
	}
	return next
}

// act heals, writes the condition and removes the taint, as due.
func (r *Reporter) act(ctx context.Context, src Source, s *state) error {
	if err := r.heal(ctx, src, s); err != nil {
		return err
	}
	if r.opts.Condition != "" {
		if err := r.writeCondition(ctx, s); err != nil {
			return err
		}
	}
	if r.opts.StartupTaint != "" {
		return r.removeTaint(ctx, s)
	}
	return nil
}

// heal: the kubelet confirmed the registration, yet the CSINode entry or
// the annotation key is gone (the CSINode garbage-collected after its Node
// was deleted and created again, or deleted by hand). Looked at again
// fresh, a loss makes the registrar register again, once per loss; a loss
// still there after the next confirmation is reported, not retried.
func (r *Reporter) heal(ctx context.Context, src Source, s *state) error {
	if s.st.Stage != registrar.StageRegistered || s.node == nil || !s.csiKnown {
		return nil
	}
	if registration(s).Registered() {
		if s.lost != "" {
			r.log.Info("the driver's registration is in the API server again", "driver", s.st.DriverName)
			r.lost.Store(nil)
		}
		s.lost, s.healedAt = "", time.Time{}
		return nil
	}
	if s.lost != "" {
		return nil // reported; the watches say when it is back
	}
	// The watches may lag the kubelet, which wrote both before it confirmed:
	// look again.
	if err := r.refresh(ctx, s); err != nil {
		return err
	}
	reg := registration(s)
	if reg.Registered() {
		return nil
	}
	what := reg.Problem()
	switch {
	case s.healedAt.IsZero():
		err := src.Reregister("the API server lost the driver's registration: " + what)
		if err == nil {
			s.healedAt = s.st.Since
			r.log.Warn("the API server lost the driver's registration; registering again", "driver", s.st.DriverName, "lost", what)
			return nil
		}
		what += "; registering again is not possible: " + err.Error()
	case !s.st.Since.After(s.healedAt):
		return nil // the new registration is not confirmed yet
	default:
		what += " (still after registering again)"
	}
	s.lost = "the driver's registration is lost in the API server: " + what
	r.lost.Store(&s.lost)
	r.log.Error("the driver's registration is lost in the API server and was not healed", "driver", s.st.DriverName, "lost", what,
		"fix", "restart the kubelet, or delete the node plugin's pod")
	return nil
}

// refresh reads the Node and the CSINode again.
func (r *Reporter) refresh(ctx context.Context, s *state) error {
	n, err := r.c.GetNode(ctx, r.opts.NodeName)
	if err != nil {
		return err
	}
	s.node = n
	c, err := r.c.GetCSINode(ctx, r.opts.NodeName)
	switch {
	case IsNotFound(err):
		s.csinode = nil
	case err != nil:
		return err
	default:
		s.csinode = c
	}
	s.csiKnown = true
	return nil
}

// writeCondition writes the condition when it changed, when the Node lost
// it, or when the heartbeat is due. lastTransitionTime changes only with
// the status, as the Node Problem Detector keeps it.
//
// An instance that does not hold the registration (a new pod in a rollout,
// while the old one still holds it) does not overwrite a True that another
// instance keeps fresh while the kubelet's registration is in the API
// server: the condition does not change while the driver stays registered.
func (r *Reporter) writeCondition(ctx context.Context, s *state) error {
	want, ok := desired(s.st, s.lost)
	if !ok {
		return nil
	}
	now := r.now()
	var onNode *Condition
	if s.node != nil {
		onNode = s.node.condition(r.opts.Condition)
	}
	if sameState(s.written, &want) && sameState(onNode, &want) && now.Sub(s.writtenAt) < r.heartbeat {
		return nil
	}
	n, err := r.c.GetNode(ctx, r.opts.NodeName)
	if err != nil {
		return err
	}
	s.node, onNode = n, n.condition(r.opts.Condition)
	s.waitStale = time.Time{}
	if want.Status != "True" && !s.heldTrue && onNode != nil && onNode.Status == "True" {
		// A handover instance that has not identified its driver has not
		// joined yet: it cannot tell whether the registration is still in
		// the API server, and the instance holding it keeps the True fresh.
		joining := r.opts.Handover && s.st.DriverName == ""
		if !s.csiKnown && !joining {
			if err := r.refresh(ctx, s); err != nil {
				return err
			}
		}
		if !joining && !registration(s).Registered() {
			onNode.LastHeartbeatTime = "" // the kubelet has no registration: nobody holds it, write False now
		}
		if hb, err := time.Parse(time.RFC3339, onNode.LastHeartbeatTime); err == nil {
			if stale := hb.Add(2*r.heartbeat + 30*time.Second); now.Before(stale) {
				s.waitStale = stale
				return nil // another instance holds the registration and says so
			}
		}
	}
	want.Type = r.opts.Condition
	stamp := now.UTC().Format(time.RFC3339)
	want.LastHeartbeatTime, want.LastTransitionTime = stamp, stamp
	if onNode != nil && onNode.Status == want.Status && onNode.LastTransitionTime != "" {
		want.LastTransitionTime = onNode.LastTransitionTime
	}
	n, err = r.c.PatchNodeConditions(ctx, r.opts.NodeName, want)
	if err != nil {
		return err
	}
	if !sameState(s.written, &want) || !sameState(onNode, &want) {
		r.log.Info("Node condition written", "status", want.Status, "reason", want.Reason, "message", want.Message)
	} else {
		r.log.Debug("Node condition heartbeat", "status", want.Status)
	}
	s.node, s.written, s.writtenAt, s.heldTrue = n, &want, now, want.Status == "True"
	return nil
}

// removeTaint removes the startup taint once this instance wrote the
// condition True (or, without a condition, once the kubelet confirmed) and
// the CSINode lists the driver; once per Node object, never added back.
func (r *Reporter) removeTaint(ctx context.Context, s *state) error {
	confirmed := s.st.Stage == registrar.StageRegistered && s.lost == ""
	if r.opts.Condition != "" {
		confirmed = confirmed && s.heldTrue
	}
	if !confirmed || s.node == nil || s.taintDone == s.node.Metadata.UID {
		return nil
	}
	if !registration(s).Registered() {
		return nil // the watches bring the CSINode entry and the annotation
	}
	n, err := r.c.GetNode(ctx, r.opts.NodeName)
	if err != nil {
		return err
	}
	s.node = n
	for i, t := range n.Spec.Taints {
		if t.Key != r.opts.StartupTaint {
			continue
		}
		if err := r.c.RemoveTaint(ctx, r.opts.NodeName, i, t.Key); err != nil {
			if statusOf(err) == http.StatusUnprocessableEntity || statusOf(err) == http.StatusConflict {
				return fmt.Errorf("the Node's taints changed while the startup taint was removed: %w", err)
			}
			return err
		}
		r.log.Info("startup taint removed", "taint", t.Key, "effect", t.Effect, "driver", s.st.DriverName)
		// Several taints may have the key (one per effect): the next look
		// removes the next one.
		return r.removeTaint(ctx, s)
	}
	s.taintDone = n.Metadata.UID
	return nil
}
