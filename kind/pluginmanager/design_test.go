package pluginmanager

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The tests of issue 43's failing sequences (sequences_test.go) run against
// the handover (Options.RollingUpdate: one registration socket at the
// plain path whose descriptor passes from pod to pod, and the endpoint link
// csi-endpoint.sock beside the drivers' sockets). The rolling-update mode of
// the previous release (each pod announced its own registration socket and
// endpoint) failed TestLateConfirmationAtLeave; its results are in issue
// 43's closing note.

// newSequenceWorld is newWorld for a driver name the CSI handler may still
// hold from an earlier run of the test in this process (-count): its
// in-memory store is the process's, and a test that ends with the kubelet
// halted first (a restarted plugin manager is stopped before the pods) leaves
// the driver in it. A fresh node's kubelet holds nothing.
func newSequenceWorld(t *testing.T, driverName string) *world {
	kubeletDrivers.Delete(driverName)
	w := newWorld(t, driverName)
	t.Cleanup(func() { kubeletDrivers.Delete(driverName) })
	return w
}

// podDriver starts the driver of one pod: every pod's driver listens in
// one directory (the DaemonSet's socket-dir hostPath) as <label>.sock,
// where the endpoint link and the rendezvous live.
func (w *world) podDriver(label string) *driver {
	d := startDriverAt(w.t, filepath.Join(w.dir, "plugins", label+".sock"), w.name, false)
	w.drivers = append(w.drivers, d)
	return d
}

// podOptions are the registrar options of the pod whose driver is d.
func (w *world) podOptions(d *driver, podUID string) registrar.Options {
	return registrarOptions(d, w.reg, podUID)
}

// startPod starts the registrar of a pod in-process.
func (w *world) startPod(label string, d *driver, podUID string) *instance {
	opts := w.podOptions(d, podUID)
	log := newTestLog(w.t, "registrar "+label+": ")
	opts.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{}))
	r, err := registrar.New(opts)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	i := &instance{label: label, log: log, r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { i.done <- r.Run(ctx) }()
	w.t.Cleanup(func() { i.stop(w.t) })
	return i
}

// liveEndpoint reports whether the CSI handler holds an endpoint for the
// driver and a driver answers Probe there (dialed as the kubelet dials
// it: the path, through a link if it is one).
func (w *world) liveEndpoint() (endpoint string, live bool) {
	d, ok := kubeletDrivers.Get(w.name)
	if !ok {
		return "", false
	}
	ep := fieldString(d, "endpoint")
	conn, err := csiplugin.Dial(ep)
	if err != nil {
		return ep, false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	return ep, err == nil
}

// holdingHandler is the CSI handler of a restarted kubelet that holds the
// first RegisterPlugin call whose endpoint hold selects until release is
// closed: the registration is under way (GetInfo answered, no Notify yet)
// while the test changes the node. held is closed when that call arrives.
// With lostRaceFor set, the validation of the registration at that
// endpoint waits until another registration succeeded and then forgets it
// (lostRaceHandler's interleaving: validate-then-set is not atomic in the
// handler, so two operations on two sockets can end in this order).
type holdingHandler struct {
	handler
	name        string
	hold        func(endpoint string) bool
	lostRaceFor string
	// after, when set, runs once after the first successful RegisterPlugin
	// whose endpoint it selects, before the plugin manager's Notify.
	after       func(endpoint string) bool
	afterDo     func()
	onceAfter   sync.Once
	held        chan struct{}
	release     chan struct{}
	otherDone   chan struct{}
	onceHeld    sync.Once
	onceOther   sync.Once
	onceForget  sync.Once
	onceRelease sync.Once
}

// let releases the held call (once; later calls do nothing).
func (h *holdingHandler) let() { h.onceRelease.Do(func() { close(h.release) }) }

// newHoldingHandler returns the handler; hold nil holds nothing.
func newHoldingHandler(inner handler, name string, hold func(endpoint string) bool) *holdingHandler {
	if hold == nil {
		hold = func(string) bool { return false }
	}
	return &holdingHandler{handler: inner, name: name, hold: hold,
		held: make(chan struct{}), release: make(chan struct{}), otherDone: make(chan struct{})}
}

func (h *holdingHandler) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	if h.lostRaceFor != "" && endpoint == h.lostRaceFor {
		select {
		case <-h.otherDone:
			h.onceForget.Do(func() { kubeletDrivers.Delete(h.name) })
		case <-time.After(registerWait):
		}
	}
	return h.handler.ValidatePlugin(ctx, name, endpoint, versions)
}

func (h *holdingHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	first := false
	if h.hold(endpoint) {
		h.onceHeld.Do(func() { first = true })
	}
	if first {
		close(h.held)
		<-h.release
	}
	err := h.handler.RegisterPlugin(ctx, name, endpoint, versions, timeout)
	if err == nil && h.after != nil && h.after(endpoint) {
		h.onceAfter.Do(h.afterDo)
	}
	if err == nil && endpoint != h.lostRaceFor {
		h.onceOther.Do(func() { close(h.otherDone) })
	}
	return err
}

// restartKubeletWith restarts the kubelet (restartKubelet) with the CSI
// handler h in front of the recorded one.
func (w *world) restartKubeletWith(t *testing.T, h *holdingHandler) {
	t.Cleanup(h.let) // a test that ends early must not leave the operation held
	w.pm.halt()
	kubeletDrivers.Delete(w.name)
	w.pm = startPluginManager(t, w.reg, h, w.pm.period)
}

// awaitLiveRegistration waits at most rounds reconciler rounds for the CSI
// handler to hold the driver at an endpoint whose driver answers Probe and
// the CSINode to list the driver; it returns what it saw last.
func (w *world) awaitLiveRegistration(t *testing.T, rounds int) (endpoint string, live, inCSINode bool) {
	t.Helper()
	for i := 0; ; i++ {
		endpoint, live = w.liveEndpoint()
		inCSINode = w.kubelet.csiNodeHas(t, w.name)
		if (live && inCSINode) || i == rounds {
			return endpoint, live, inCSINode
		}
		w.pm.waitRounds(t, 1)
	}
}
