package doctor_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

const rolled = "roll.csi.example.com"

// TestDeadInstance: a socket of the previous release's mode nobody listens
// on (an instance killed with SIGKILL) next to a live instance of its
// driver is a harmless leftover, said so; with no live socket of its
// driver it is a stale socket.
func TestDeadInstance(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	dead := filepath.Join(n.registry, csiplugin.RollingUpdateSocketName(rolled, csiplugin.InstanceID("dead-pod"), 7))
	registrartest.StaleSocket(t, dead)
	drv := n.serveDriver(t, "roll", &driver{name: rolled, nodeID: "node-1"})
	now := time.Now().UnixMilli()
	liveSock := n.fakeInstance(t, drv, "live-pod", registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000}, true)

	r := n.run(t, n.opts())
	f := wantFinding(t, r, doctor.SeverityInfo, dead, "a dead instance's leftover", csiplugin.InstanceID("dead-pod"), "connection refused",
		"harmless while "+filepath.Base(liveSock)+" serves the driver")
	t.Logf("dead instance's leftover: %s\n  fix: %s", f.Message, f.Fix)
	if !strings.Contains(f.Fix, "do not rm it") || !r.Healthy() || len(r.Findings) != 1 {
		t.Errorf("want healthy, that note only, and no rm:\n%s", dump(r))
	}

	// Its driver gone from the node altogether: stale.
	n2 := newNode(t)
	alone := filepath.Join(n2.registry, csiplugin.RollingUpdateSocketName(rolled, csiplugin.InstanceID("dead-pod"), 7))
	registrartest.StaleSocket(t, alone)
	r = n2.run(t, n2.opts())
	f = wantFinding(t, r, doctor.SeverityError, alone, "stale socket of a dead rolling-update instance", "no live socket of its driver")
	t.Logf("dead instance alone: %s\n  fix: %s", f.Message, f.Fix)
}

// fakeInstance serves an announcement socket of the driver as an instance
// in the given state would: GetInfo with the mode's version, and the
// handover service (csiregistrar.handover.v1.Handover, fixed across
// releases) telling st. It covers the states two real instances reach only
// for a moment. handover false serves GetInfo alone.
func (n *node) fakeInstance(t *testing.T, endpoint, podUID string, st registrar.InstanceState, handover bool) string {
	t.Helper()
	id := csiplugin.InstanceID(podUID)
	st.Driver, st.Instance = rolled, id
	p := filepath.Join(n.registry, csiplugin.RollingUpdateSocketName(rolled, id, st.Version))
	serve(t, p, func(s *grpc.Server) {
		registerapi.RegisterRegistrationServer(s, &registration{info: &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: rolled,
			Endpoint: endpoint, SupportedVersions: []string{csiplugin.RollingUpdateVersion(st.Version)}}})
		if handover {
			s.RegisterService(&handoverDesc, st)
		}
	})
	return p
}

var handoverDesc = grpc.ServiceDesc{
	ServiceName: "csiregistrar.handover.v1.Handover",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
				return err
			}
			b, err := json.Marshal(srv)
			if err != nil {
				return err
			}
			if err := stream.SendMsg(wrapperspb.Bytes(b)); err != nil {
				return err
			}
			<-stream.Context().Done()
			return nil
		}}},
}

// TestInstanceStates: the rules on the states of two instances, from
// handover services telling them.
func TestInstanceStates(t *testing.T) {
	t.Parallel()
	now := time.Now().UnixMilli()
	older := registrar.InstanceState{Birth: now - 60_000, Version: 100, Confirmed: true, ConfirmedAt: now - 50_000}
	for _, tc := range []struct {
		name     string
		old, new registrar.InstanceState
		sev      doctor.Severity
		subs     []string
	}{
		{"newest confirmed", older, registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000},
			doctor.SeverityInfo, []string{"rollout in progress: 2 live instances", "newest, confirmed by the kubelet", "older, confirmed by the kubelet", "s ago, standing by"}},
		{"older terminating", registrar.InstanceState{Birth: now - 60_000, Version: 100, Confirmed: true, ConfirmedAt: now - 50_000, Terminating: true},
			registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000},
			doctor.SeverityInfo, []string{"rollout in progress: 2 live instances", "older, confirmed by the kubelet", "s ago, terminating"}},
		{"newest not announced", older, registrar.InstanceState{Birth: now - 1_000},
			doctor.SeverityWarning, []string{"rollout in progress: the new instance is not registered yet", "newest, not announced yet"}},
		{"newest rejected", older, registrar.InstanceState{Birth: now - 10_000, Version: 200, Failed: true},
			doctor.SeverityWarning, []string{"rollout stuck: the kubelet rejected the new instance's registration", "newest, rejected by the kubelet", "older, confirmed by the kubelet", "s ago, holds the registration"}},
		{"newest driver down", registrar.InstanceState{Birth: now - 60_000, Version: 300, Confirmed: true, ConfirmedAt: now - 1_000},
			registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000, DriverDown: true},
			doctor.SeverityWarning, []string{"rollout held: the newest instance's driver does not answer Probe", "newest, confirmed by the kubelet", "its driver does not answer Probe", "older, confirmed by the kubelet", "s ago, holds the registration"}},
		{"newest terminating", older, registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000, Terminating: true},
			doctor.SeverityInfo, []string{"rollout in progress: the newest instance is terminating", "newest, confirmed by the kubelet", "s ago, terminating"}},
		{"older confirmed later", registrar.InstanceState{Birth: now - 60_000, Version: 300, Confirmed: true, ConfirmedAt: now - 1_000},
			registrar.InstanceState{Birth: now - 10_000, Version: 200, Confirmed: true, ConfirmedAt: now - 5_000},
			doctor.SeverityWarning, []string{"instances compete: the kubelet confirmed older instance " + csiplugin.InstanceID("old") + " after the newest one", "older, confirmed by the kubelet", "s ago, holds the registration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			drv := n.serveDriver(t, "roll", &driver{name: rolled, nodeID: "node-1"})
			n.fakeInstance(t, drv, "old", tc.old, true)
			n.fakeInstance(t, drv, "new", tc.new, true)
			r := n.run(t, n.opts())
			f := wantFinding(t, r, tc.sev, rolled, tc.subs...)
			t.Logf("%s: %s\n  fix: %s", tc.sev, f.Message, f.Fix)
			if len(r.Findings) != 1 || r.Healthy() != (tc.sev == doctor.SeverityInfo) {
				t.Errorf("want that finding only:\n%s", dump(r))
			}
		})
	}

	// A socket with a mode name that does not tell its state.
	n := newNode(t)
	drv := n.serveDriver(t, "roll", &driver{name: rolled, nodeID: "node-1"})
	n.fakeInstance(t, drv, "old", older, true)
	mute := n.fakeInstance(t, drv, "new", registrar.InstanceState{Birth: now, Version: 200}, false)
	r := n.run(t, n.opts())
	f := wantFinding(t, r, doctor.SeverityWarning, rolled, "the state of rolling-update instance "+csiplugin.InstanceID("new"), "could not be read", "cannot tell a rollout from a conflict")
	t.Logf("state unreadable: %s", f.Message)
	if e := entry(t, r, mute); e.Instance == nil || e.Instance.StateError == "" {
		t.Errorf("entry %+v", e.Instance)
	}
}
