package pluginmanager

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// How long the tests wait for what the registrars and the kubelet's plugin
// manager (a reconciler round every kubeletPeriod, operations of a few ms)
// do, and the observation windows of their "does not happen" proofs, in
// the kubelet's reconciler rounds (kubeletPM.waitRounds).
const (
	registerWait = 15 * time.Second
	// settleRounds: the plugin manager acts on a change in its next round
	// (the plugin watcher at once); three rounds of margin.
	settleRounds = 3
)

// childRegistrar is a registrar in a process of its own (the test binary
// run with childEnv), which can be killed with SIGKILL.
type childRegistrar struct {
	cmd  *exec.Cmd
	log  *testLog
	done chan error
}

func startChild(t *testing.T, label string, opts registrar.Options) *childRegistrar {
	js, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	log := newTestLog(t, "registrar "+label+" (pid): ")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childRegistrar{cmd: cmd, log: log, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(c.kill)
	return c
}

// waitConfirmed returns once the kubelet's confirmation (Notify) reached
// registrar c and the kubelet took the answer: its actual state of the
// world lists the driver, which the operation generator adds only after a
// Notify that succeeded. A kill before that fails the kubelet's Notify, and
// kubelets from 1.37 on then deregister the driver they just registered;
// the registrar's log line alone is written before its answer is sent. A
// row that kills a registered registrar must wait for this first.
func (w *world) waitConfirmed(t *testing.T, c *childRegistrar) {
	t.Helper()
	deadline := time.Now().Add(registerWait)
	for c.log.count("the kubelet confirmed the registration") == 0 || !w.inActualState() {
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet's confirmation did not reach the registrar and the kubelet's actual state in %s", registerWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inActualState reports whether the kubelet's actual state of the world
// lists the driver (read through the embedded cache: no round counted).
func (w *world) inActualState() bool {
	for _, p := range w.pm.asw.ActualStateOfWorld.GetRegisteredPlugins() {
		if p.Name == w.name {
			return true
		}
	}
	return false
}

// kill sends SIGKILL: nothing of the registrar's cleanup runs.
func (c *childRegistrar) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.done <- nil // later kills return at once
}

// restartKubelet stops the kubelet's plugin manager and starts a new one
// on the same registration directory, with the same CSI handler: a kubelet
// restart (its in-memory store of drivers is lost with it).
func (w *world) restartKubelet(t *testing.T) {
	w.pm.halt()
	kubeletDrivers.Delete(w.name)
	w.pm = startPluginManager(t, w.reg, w.h, w.pm.period)
}
