package doctor_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
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
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

const rolled = "roll.csi.example.com"

// instance runs, in this process, what one pod of a node plugin with the
// rolling-update mode runs: the stub driver on a CSI socket of its own and
// csi-registrar with --rolling-update=podUID (podUID "" : without the
// mode, on <driver>-reg.sock). It stops when the test ends, or at stop.
type instance struct {
	reg  *registrar.Registrar
	stop func()
}

func (n *node) startInstance(t *testing.T, podUID string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	name := podUID
	if name == "" {
		name = "plain"
	}
	drvSock := filepath.Join(n.dir, name+".sock")
	drv, err := stubdriver.New(stubdriver.Options{Endpoint: drvSock, Name: rolled, NodeID: "node-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registrar.New(registrar.Options{CSIAddress: drvSock, KubeletRegistrationPath: drvSock,
		PluginRegistrationPath: n.registry, RollingUpdate: podUID, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { drv.Run(ctx); done <- struct{}{} }()
	go func() { reg.Run(ctx); done <- struct{}{} }()
	var stopped bool
	inst := &instance{reg: reg, stop: func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			<-done
		}
	}}
	t.Cleanup(inst.stop)
	return inst
}

// await waits until the registrar is in one of the stages and serves a
// socket (or, standing by, may serve none), and returns the socket's path.
func (i *instance) await(t *testing.T, stages ...registrar.Stage) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := i.reg.Status()
		for _, s := range stages {
			if st.Stage == s && (st.SocketPath != "" || s == registrar.StageStandingBy) {
				return st.SocketPath
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrar in stage %v, want %v", st, stages)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// confirm plays the kubelet registering the socket at path.
func confirm(t *testing.T, path string) {
	t.Helper()
	reg, err := registrartest.Register(context.Background(), path)
	if err != nil || reg.Err != nil {
		t.Fatalf("registering %s: %v, %v", path, err, reg)
	}
}

// TestRollout: two real instances of one driver, as a DaemonSet rolling
// with maxSurge leaves them. While the kubelet has not confirmed the new
// one yet, a warning; once it has, with the old one standing by, a note
// (healthy, exit 0); once the old one left, nothing.
func TestRollout(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	old := n.startInstance(t, "old-pod")
	oldSock := old.await(t, registrar.StageWaitingForKubelet)
	confirm(t, oldSock)
	old.await(t, registrar.StageRegistered)

	niu := n.startInstance(t, "new-pod")
	newSock := niu.await(t, registrar.StageWaitingForKubelet)
	old.await(t, registrar.StageStandingBy)
	newID := csiplugin.InstanceID("new-pod")
	oldID := csiplugin.InstanceID("old-pod")

	r := n.run(t, n.opts())
	f := wantFinding(t, r, doctor.SeverityWarning, rolled, "rollout in progress: the new instance is not registered yet",
		"instance "+newID+" ("+filepath.Base(newSock)+": newest, announced version 1.",
		"instance "+oldID+" ("+filepath.Base(oldSock)+": older, confirmed by the kubelet", "holds the registration")
	t.Logf("the new instance not confirmed yet: %s\n  fix: %s", f.Message, f.Fix)
	if len(find(r, doctor.SeverityError, rolled)) != 0 {
		t.Errorf("a rollout is no duplicate:\n%s", dump(r))
	}
	if e := entry(t, r, newSock); e.Instance == nil || e.Instance.ID != newID || e.Instance.State == nil || e.Instance.State.Confirmed {
		t.Errorf("new instance's entry: %+v", e.Instance)
	}

	confirm(t, newSock)
	niu.await(t, registrar.StageRegistered)
	r = n.run(t, n.opts())
	f = wantFinding(t, r, doctor.SeverityInfo, rolled, "rollout in progress: 2 live instances of this driver",
		"instance "+newID+" ("+filepath.Base(newSock)+": newest, confirmed by the kubelet",
		"instance "+oldID+" ("+filepath.Base(oldSock)+": older, confirmed by the kubelet", "standing by")
	t.Logf("rollout in progress: %s\n  fix: %s", f.Message, f.Fix)
	if !r.Healthy() || len(r.Findings) != 1 {
		t.Errorf("want healthy, that note only:\n%s", dump(r))
	}

	old.stop() // the DaemonSet deletes the old pod: it retires its socket
	r = n.run(t, n.opts())
	if len(r.Findings) != 0 {
		t.Errorf("after the old instance left, want no findings:\n%s", dump(r))
	}
}

// TestDeadInstance: a mode socket nobody listens on (an instance killed
// with SIGKILL) next to a live instance of its driver is a harmless
// leftover, said so; with no live socket of its driver it is a stale socket.
func TestDeadInstance(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	dead := filepath.Join(n.registry, csiplugin.RollingUpdateSocketName(rolled, csiplugin.InstanceID("dead-pod"), 7))
	registrartest.StaleSocket(t, dead)
	live := n.startInstance(t, "live-pod")
	liveSock := live.await(t, registrar.StageWaitingForKubelet)
	confirm(t, liveSock)
	live.await(t, registrar.StageRegistered)

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

// TestIntoTheMode: the first rollout into the mode: an old pod's registrar
// without it and a new pod's with it both serve the driver.
func TestIntoTheMode(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	plain := n.startInstance(t, "")
	plainSock := plain.await(t, registrar.StageWaitingForKubelet)
	mode := n.startInstance(t, "new-pod")
	modeSock := mode.await(t, registrar.StageWaitingForKubelet)
	r := n.run(t, n.opts())
	f := wantFinding(t, r, doctor.SeverityInfo, rolled, "instances with and without the rolling-update mode",
		plainSock+" (a registrar without the mode)", "instance "+csiplugin.InstanceID("new-pod")+" ("+filepath.Base(modeSock), "expected briefly during the first rollout into the mode")
	t.Logf("into the mode: %s\n  fix: %s", f.Message, f.Fix)
	if !r.Healthy() || len(r.Findings) != 1 {
		t.Errorf("want healthy, that note only:\n%s", dump(r))
	}

	// The registrar without the mode leaves: the instance announces again
	// at its path. The next rollout's overlap is two instances of the mode,
	// the older one on <driver>-reg.sock (it tells its state there).
	confirm(t, modeSock)
	mode.await(t, registrar.StageRegistered)
	plain.stop()
	deadline := time.Now().Add(15 * time.Second)
	for st := mode.reg.Status(); st.SocketPath != plainSock || st.Stage != registrar.StageWaitingForKubelet; st = mode.reg.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("the instance did not announce at %s once the registrar without the mode left: %v", plainSock, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	confirm(t, plainSock)
	mode.await(t, registrar.StageRegistered)
	next := n.startInstance(t, "next-pod")
	nextSock := next.await(t, registrar.StageWaitingForKubelet)
	r = n.run(t, n.opts())
	f = wantFinding(t, r, doctor.SeverityWarning, rolled, "rollout in progress: the new instance is not registered yet",
		"instance "+csiplugin.InstanceID("next-pod")+" ("+filepath.Base(nextSock)+": newest",
		"instance "+csiplugin.InstanceID("new-pod")+" ("+filepath.Base(plainSock)+": older, confirmed by the kubelet")
	t.Logf("the next rollout, the older instance on the plain path: %s", f.Message)
	if len(find(r, doctor.SeverityInfo, rolled)) != 0 {
		t.Errorf("an instance of the mode on the plain path taken for a registrar without the mode:\n%s", dump(r))
	}
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
