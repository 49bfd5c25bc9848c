package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

const (
	testDriver    = "stub.csi.example.com"
	testNode      = "node-1"
	testCondition = "stub.csi.example.com/NodePluginRegistered"
	testTaint     = "stub.csi.example.com/agent-not-ready"
	waitTimeout   = 20 * time.Second
)

// source stands in for a Registrar: a status the test sets, and Reregister
// recorded (and answered by onReregister).
type source struct {
	mu           sync.Mutex
	st           registrar.Status
	changed      chan struct{}
	reregistered []string
	onReregister func() error
}

func newSource() *source {
	return &source{st: registrar.Status{Stage: registrar.StageStarting, DriverName: testDriver}, changed: make(chan struct{})}
}

func (s *source) set(stage registrar.Stage, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Stage, s.st.Detail, s.st.Since = stage, detail, time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *source) WatchStatus() (registrar.Status, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st, s.changed
}

func (s *source) Reregister(why string) error {
	s.mu.Lock()
	s.reregistered = append(s.reregistered, why)
	fn := s.onReregister
	s.mu.Unlock()
	if fn != nil {
		return fn()
	}
	return nil
}

func (s *source) reregisterCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reregistered)
}

// start runs a Reporter against the fake until the test ends.
func start(t *testing.T, f *fakeAPIServer, src Source, opts Options, heartbeat time.Duration) *Reporter {
	t.Helper()
	opts.NodeName, opts.Client = testNode, f.client(t)
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if heartbeat != 0 {
		r.heartbeat = heartbeat // below MinHeartbeat: tests only
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, src) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func cond(n Node) *Condition { return n.condition(testCondition) }

func conditionPatches(ps []fakePatch) []Condition {
	var out []Condition
	for _, p := range ps {
		if !strings.HasSuffix(p.path, "/status") {
			continue
		}
		var b struct {
			Status struct {
				Conditions []Condition `json:"conditions"`
			} `json:"status"`
		}
		if json.Unmarshal(p.body, &b) == nil {
			out = append(out, b.Status.Conditions...)
		}
	}
	return out
}

// TestConditionFollowsRegistration: False with the stage's reason while the
// kubelet has not confirmed, True after; the patch is a strategic merge
// patch of nodes/status with only this condition; lastTransitionTime
// changes with the status only, lastHeartbeatTime at each heartbeat.
func TestConditionFollowsRegistration(t *testing.T) {
	f := newFakeAPIServer(t, testNode)
	other := Condition{Type: "Ready", Status: "True", Reason: "KubeletReady", LastTransitionTime: "2026-01-01T00:00:00Z", LastHeartbeatTime: "2026-01-01T00:00:00Z"}
	// False since long ago (the previous pod's): still False keeps that time.
	falseSince := "2026-01-01T00:00:00Z"
	f.setConditions(other, Condition{Type: testCondition, Status: "False", Reason: ReasonDriverNotAnswering, LastTransitionTime: falseSince, LastHeartbeatTime: falseSince})
	src := newSource()
	src.set(registrar.StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
	start(t, f, src, Options{Condition: testCondition}, 300*time.Millisecond)
	ctx := waitCtx(t)

	if err := f.waitFor(ctx, "condition False", func(n Node, _ []fakePatch) bool {
		c := cond(n)
		return c != nil && c.Status == "False" && c.Reason == ReasonWaitingForKubelet
	}); err != nil {
		t.Fatal(err)
	}
	n, ps := f.snapshot()
	if got := cond(n).LastTransitionTime; got != falseSince {
		t.Errorf("False to False changed lastTransitionTime from %s to %s", falseSince, got)
	}
	for _, p := range ps {
		if p.path != nodesPath+"/"+testNode+"/status" || p.contentType != "application/strategic-merge-patch+json" {
			t.Errorf("patch of %s as %s; want nodes/status as a strategic merge patch", p.path, p.contentType)
		}
	}
	if c := n.condition("Ready"); c == nil || *c != other {
		t.Errorf("the kubelet's Ready condition was changed: %+v", c)
	}

	// Confirmed: True, a new transition.
	src.set(registrar.StageRegistered, "")
	if err := f.waitFor(ctx, "condition True", func(n Node, _ []fakePatch) bool { c := cond(n); return c != nil && c.Status == "True" }); err != nil {
		t.Fatal(err)
	}
	n, _ = f.snapshot()
	c := *cond(n)
	if c.Reason != ReasonRegistered || !strings.Contains(c.Message, testDriver) {
		t.Errorf("True condition %+v: want reason %s and the driver's name", c, ReasonRegistered)
	}
	if c.LastTransitionTime == falseSince {
		t.Errorf("lastTransitionTime %s did not change from False to True", c.LastTransitionTime)
	}
	trueSince := c.LastTransitionTime

	// Heartbeats: lastHeartbeatTime moves on, lastTransitionTime stays.
	if err := f.waitFor(ctx, "a heartbeat a second later", func(n Node, _ []fakePatch) bool {
		c := cond(n)
		return c != nil && c.LastHeartbeatTime > trueSince
	}); err != nil {
		t.Fatal(err)
	}
	n, ps = f.snapshot()
	if got := cond(n).LastTransitionTime; got != trueSince {
		t.Errorf("a heartbeat changed lastTransitionTime from %s to %s", trueSince, got)
	}
	for _, pc := range conditionPatches(ps) {
		if pc.Type != testCondition {
			t.Errorf("patched condition %q; only %q is ours", pc.Type, testCondition)
		}
	}

	// The driver stops answering: False, with the reason.
	src.set(registrar.StageWaitingForDriver, "rpc error: connection refused")
	if err := f.waitFor(ctx, "condition False DriverNotAnswering", func(n Node, _ []fakePatch) bool {
		c := cond(n)
		return c != nil && c.Status == "False" && c.Reason == ReasonDriverNotAnswering && strings.Contains(c.Message, "connection refused")
	}); err != nil {
		t.Fatal(err)
	}
}

// TestConditionUnchangedInRollout: a new instance that has not taken the
// registration yet does not overwrite the True another instance keeps
// fresh, and keeps its lastTransitionTime when it confirms; an instance
// standing by writes nothing.
func TestConditionUnchangedInRollout(t *testing.T) {
	f := newFakeAPIServer(t, testNode)
	since := "2026-11-01T00:00:00Z"
	held := Condition{Type: testCondition, Status: "True", Reason: ReasonRegistered, Message: "the kubelet confirmed the registration of " + testDriver + " and the driver answers",
		LastTransitionTime: since, LastHeartbeatTime: time.Now().UTC().Format(time.RFC3339)}
	f.setConditions(held)
	f.annotate(testDriver)
	f.setCSINodeDrivers(testDriver) // the old instance's registration
	src := newSource()
	src.set(registrar.StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
	start(t, f, src, Options{Condition: testCondition}, time.Minute)
	ctx := waitCtx(t)

	// Standing by, then confirmed: the only write is True, since kept.
	src.set(registrar.StageStandingBy, "instance x is newer and holds or takes the registration")
	src.set(registrar.StageWaitingForKubelet, "the newer instance left; waiting for the kubelet")
	src.set(registrar.StageRegistered, "")
	checkTrueKept(t, ctx, f, "the new instance", since)
}

// TestConditionStaleTrueReplaced: a True nobody keeps fresh (its writer is
// gone) is replaced by this instance's False.
func TestConditionStaleTrueReplaced(t *testing.T) {
	f := newFakeAPIServer(t, testNode)
	f.setConditions(Condition{Type: testCondition, Status: "True", Reason: ReasonRegistered, LastTransitionTime: "2026-11-01T00:00:00Z", LastHeartbeatTime: "2026-11-01T00:00:00Z"})
	f.annotate(testDriver)
	f.setCSINodeDrivers(testDriver)
	src := newSource()
	src.set(registrar.StageRejected, "topology label collision")
	start(t, f, src, Options{Condition: testCondition}, time.Minute)
	if err := f.waitFor(waitCtx(t), "False KubeletRejected", func(n Node, _ []fakePatch) bool {
		c := cond(n)
		return c != nil && c.Status == "False" && c.Reason == ReasonKubeletRejected && c.LastTransitionTime != "2026-11-01T00:00:00Z"
	}); err != nil {
		t.Fatal(err)
	}
}

// TestStartupTaintRemovedAfterConfirmation: the taint stays until the
// condition is True and the CSINode lists the driver; only that taint goes,
// by a JSON patch that tests the key first.
func TestStartupTaintRemovedAfterConfirmation(t *testing.T) {
	f := newFakeAPIServer(t, testNode)
	keep := Taint{Key: "example.com/other", Effect: "NoSchedule"}
	f.setTaints(keep, Taint{Key: testTaint, Effect: "NoSchedule"})
	f.setCSINodeDrivers() // a CSINode without the driver
	src := newSource()
	src.set(registrar.StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
	start(t, f, src, Options{Condition: testCondition, StartupTaint: testTaint}, time.Minute)
	ctx := waitCtx(t)

	if err := f.waitFor(ctx, "condition False", func(n Node, _ []fakePatch) bool { return cond(n) != nil }); err != nil {
		t.Fatal(err)
	}
	// Confirmed, but the CSINode does not list the driver yet: the taint stays.
	src.set(registrar.StageRegistered, "")
	if err := f.waitFor(ctx, "condition True", func(n Node, _ []fakePatch) bool { c := cond(n); return c != nil && c.Status == "True" }); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.snapshot(); len(n.Spec.Taints) != 2 {
		t.Fatalf("taints %+v: removed before the CSINode listed the driver", n.Spec.Taints)
	}
	f.annotate(testDriver)
	f.setCSINodeDrivers(testDriver)
	if err := f.waitFor(ctx, "the startup taint gone", func(n Node, _ []fakePatch) bool { return len(n.Spec.Taints) == 1 }); err != nil {
		t.Fatal(err)
	}
	n, ps := f.snapshot()
	if n.Spec.Taints[0] != keep {
		t.Errorf("taints %+v, want only %+v", n.Spec.Taints, keep)
	}
	var jp []fakePatch
	for _, p := range ps {
		if p.contentType == "application/json-patch+json" {
			jp = append(jp, p)
		}
	}
	if len(jp) != 1 || string(jp[0].body) != `[{"op":"test","path":"/spec/taints/1/key","value":"`+testTaint+`"},{"op":"remove","path":"/spec/taints/1"}]` {
		t.Errorf("taint patches %q", jp)
	}
}

// TestLostRegistrationHealedOnce: confirmed, but the CSINode lost the
// driver: the registrar is asked to register again once; a loss still there
// after the next confirmation is reported on ReadyCheck and in the
// condition, and cleared when the entry is back.
func TestLostRegistrationHealedOnce(t *testing.T) {
	f := newFakeAPIServer(t, testNode)
	f.annotate(testDriver)
	f.setCSINodeDrivers(testDriver)
	src := newSource()
	src.set(registrar.StageRegistered, "")
	r := start(t, f, src, Options{Condition: testCondition}, time.Minute)
	ctx := waitCtx(t)
	if err := f.waitFor(ctx, "condition True", func(n Node, _ []fakePatch) bool { c := cond(n); return c != nil && c.Status == "True" }); err != nil {
		t.Fatal(err)
	}
	if src.reregisterCalls() != 0 {
		t.Fatalf("registered again with the registration intact")
	}

	// The CSINode is deleted (garbage-collected): register again, once.
	reregistered := make(chan struct{}, 4)
	src.mu.Lock()
	src.onReregister = func() error { reregistered <- struct{}{}; return nil }
	src.mu.Unlock()
	select { // the fake replays nothing a watch missed
	case <-f.csinodeWatch:
	case <-ctx.Done():
		t.Fatal("no CSINode watch")
	}
	f.setCSINodeDrivers(nil...)
	select {
	case <-reregistered:
	case <-ctx.Done():
		t.Fatal("no Reregister after the CSINode was deleted")
	}
	// The kubelet registers again but (here) its CSINode write is lost too.
	src.set(registrar.StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
	src.set(registrar.StageRegistered, "")
	if err := f.waitFor(ctx, "condition False CSINodeLost", func(n Node, _ []fakePatch) bool {
		c := cond(n)
		return c != nil && c.Status == "False" && c.Reason == ReasonCSINodeLost
	}); err != nil {
		t.Fatal(err)
	}
	if n := src.reregisterCalls(); n != 1 {
		t.Errorf("Reregister called %d times, want once", n)
	}
	if err := r.ReadyCheck(); err == nil || !strings.Contains(err.Error(), "CSINode does not list it") {
		t.Errorf("ReadyCheck: %v; want the loss", err)
	}

	// The entry comes back (e.g. the kubelet restarted): True, ready.
	f.setCSINodeDrivers(testDriver)
	if err := f.waitFor(ctx, "condition True again", func(n Node, _ []fakePatch) bool { c := cond(n); return c != nil && c.Status == "True" }); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadyCheck(); err != nil {
		t.Errorf("ReadyCheck after the entry came back: %v", err)
	}
}

// TestValidate: each bad value is named with its rule.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" valid
	}{
		{"off", Options{}, ""},
		{"condition", Options{Condition: testCondition, NodeName: "node-1"}, ""},
		{"plain condition", Options{Condition: "NodePluginRegistered", NodeName: "node-1"}, ""},
		{"taint", Options{StartupTaint: testTaint, NodeName: "node-1"}, ""},
		{"no node name", Options{Condition: testCondition}, `invalid node name "": must be set`},
		{"node name upper case", Options{Condition: testCondition, NodeName: "Node1"}, "lower-case DNS subdomain"},
		{"condition with space", Options{Condition: "stub.csi.example.com/Node Ready", NodeName: "n"}, `invalid Node condition type "stub.csi.example.com/Node Ready": its name contains ' '`},
		{"condition prefix upper case", Options{Condition: "Stub.example.com/Ready", NodeName: "n"}, "prefix must be a lower-case DNS subdomain"},
		{"condition two slashes", Options{Condition: "a.example.com/b/c", NodeName: "n"}, "at most one '/'"},
		{"condition empty name", Options{Condition: "a.example.com/", NodeName: "n"}, "1-63 characters"},
		{"condition 64 characters", Options{Condition: strings.Repeat("a", 64), NodeName: "n"}, "1-63 characters"},
		{"taint ends with dash", Options{StartupTaint: "example.com/not-ready-", NodeName: "n"}, `invalid startup taint key "example.com/not-ready-"`},
		{"heartbeat", Options{Condition: testCondition, NodeName: "n", Heartbeat: time.Second}, "at least 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v; want an error with %q", err, tc.want)
			case tc.want != "" && !csiplugin.IsValidationError(err):
				t.Errorf("Validate: %T, want a *csiplugin.ValidationError (exit code 2)", err)
			}
		})
	}
}

// TestConditionFreshTrueWithoutRegistrationReplaced: a fresh True, but the
// kubelet's registration is gone from the API server (the previous pod left
// and the kubelet unregistered the driver): nobody holds it, False at once.
func TestConditionFreshTrueWithoutRegistrationReplaced(t *testing.T) {
	f := newFakeAPIServer(t, testNode)
	now := time.Now().UTC().Format(time.RFC3339)
	f.setConditions(Condition{Type: testCondition, Status: "True", Reason: ReasonRegistered, LastTransitionTime: now, LastHeartbeatTime: now})
	f.setCSINodeDrivers()
	src := newSource()
	src.set(registrar.StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
	start(t, f, src, Options{Condition: testCondition}, time.Minute)
	if err := f.waitFor(waitCtx(t), "False WaitingForKubelet", func(n Node, _ []fakePatch) bool {
		c := cond(n)
		return c != nil && c.Status == "False" && c.Reason == ReasonWaitingForKubelet
	}); err != nil {
		t.Fatal(err)
	}
}

// TestConditionUnchangedWhileJoiningHandover: in the handover, a new
// instance starts while another holds the registration and keeps the
// condition True; until it has identified its driver (no driver name yet)
// it writes nothing, then True once it took the registration over, with
// the lastTransitionTime kept. Seen on kind before: False
// DriverNotAnswering for 25 ms at each takeover, and the Node Readiness
// Controller's taint added each time. Without the handover, the same
// instance writes False at once (the kubelet unregistered the driver when
// the old pod left).
func TestConditionUnchangedWhileJoiningHandover(t *testing.T) {
	for _, handover := range []bool{true, false} {
		t.Run(fmt.Sprintf("handover=%v", handover), func(t *testing.T) {
			f := newFakeAPIServer(t, testNode)
			since := "2026-11-01T00:00:00Z"
			f.setConditions(Condition{Type: testCondition, Status: "True", Reason: ReasonRegistered,
				LastTransitionTime: since, LastHeartbeatTime: time.Now().UTC().Format(time.RFC3339)})
			f.annotate(testDriver)
			f.setCSINodeDrivers(testDriver)
			src := newSource()
			src.st.DriverName = "" // not identified yet
			src.set(registrar.StageWaitingForDriver, "connecting to /csi/new.sock")
			start(t, f, src, Options{Condition: testCondition, Handover: handover}, time.Minute)
			ctx := waitCtx(t)
			if !handover {
				if err := f.waitFor(ctx, "False DriverNotAnswering", func(n Node, _ []fakePatch) bool {
					c := cond(n)
					return c != nil && c.Status == "False" && c.Reason == ReasonDriverNotAnswering
				}); err != nil {
					t.Fatal(err)
				}
				return
			}
			// An observation window: the reporter acts on the status at
			// once (its first step reads the Node); nothing may be written.
			time.Sleep(500 * time.Millisecond)
			if _, ps := f.snapshot(); len(ps) > 0 {
				t.Fatalf("the joining instance wrote %d patch(es) while another held the registration: %v", len(ps), conditionPatches(ps))
			}
			src.mu.Lock()
			src.st.DriverName = testDriver
			src.mu.Unlock()
			src.set(registrar.StageRegistered, "")
			checkTrueKept(t, ctx, f, "the joining instance", since)
		})
	}
}

// checkTrueKept waits for the first patch of the reporter of instance (a
// registrar that came while another held the registration) and fails t if
// it wrote any condition status but True, or if the condition's
// lastTransitionTime is not since: it only confirms what the other wrote.
func checkTrueKept(t *testing.T, ctx context.Context, f *fakeAPIServer, instance, since string) {
	t.Helper()
	if err := f.waitFor(ctx, "a True heartbeat", func(_ Node, ps []fakePatch) bool { return len(ps) > 0 }); err != nil {
		t.Fatal(err)
	}
	n, ps := f.snapshot()
	for _, c := range conditionPatches(ps) {
		if c.Status != "True" {
			t.Errorf("%s wrote %s (%s) while another held the registration", instance, c.Status, c.Reason)
		}
	}
	if got := cond(n).LastTransitionTime; got != since {
		t.Errorf("lastTransitionTime %s, want %s kept", got, since)
	}
}
