package registrar_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// dirEvents records the file events in a directory, as the kubelet's plugin
// watcher receives them.
type dirEvents struct {
	mu  sync.Mutex
	evs []fsnotify.Event
}

func watchDir(t *testing.T, dir string) *dirEvents {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	d := &dirEvents{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.Events {
			d.mu.Lock()
			d.evs = append(d.evs, ev)
			d.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Close(); <-done })
	return d
}

// removed reports whether name was removed by name (what makes the kubelet
// unregister the driver); a rename away is not.
func (d *dirEvents) removed(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ev := range d.evs {
		if filepath.Base(ev.Name) == name && ev.Has(fsnotify.Remove) {
			return true
		}
	}
	return false
}

// startInstance runs the reference driver on its own socket in e's driver
// directory and a registrar for it in the rolling-update mode.
func startInstance(t *testing.T, e env, podUID string) (*registrar.Registrar, running) {
	t.Helper()
	sock := filepath.Join(filepath.Dir(e.driverSock), podUID+".sock")
	d, err := stubdriver.New(stubdriver.Options{Endpoint: "unix://" + sock, Name: stubName, NodeID: "node-1", Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d.Run)
	return startInstanceRegistrar(t, e, podUID)
}

// startInstanceRegistrar runs the registrar of the instance of startInstance
// (again, as its container restarting).
func startInstanceRegistrar(t *testing.T, e env, podUID string) (*registrar.Registrar, running) {
	t.Helper()
	sock := filepath.Join(filepath.Dir(e.driverSock), podUID+".sock")
	return startRegistrar(t, e, nil, func(o *registrar.Options) {
		o.CSIAddress, o.KubeletRegistrationPath, o.RollingUpdate = sock, sock, podUID
	})
}

// announced waits until r serves an announcement socket other than
// not, registers it as the kubelet does, and returns its path.
func announced(t *testing.T, r *registrar.Registrar, not string) string {
	t.Helper()
	var sock string
	eventually(t, "a new announcement", func() bool {
		sock = r.Status().SocketPath
		return sock != "" && sock != not && answers(sock)
	})
	if reg, err := registrartest.Register(t.Context(), sock); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	eventually(t, "registered", func() bool { return r.Status().Stage == registrar.StageRegistered && r.Status().SocketPath == sock })
	return sock
}

// A rollout: the new instance announces and is confirmed, the old one
// stands by and leaves without a Remove of its socket; the new one takes the
// registration back when the old one has left; the last one to leave
// unregisters and leaves nothing of the mode behind.
func TestRollingUpdateHandover(t *testing.T) {
	e := newEnv(t)
	events := watchDir(t, e.regDir)

	a, runA := startInstance(t, e, "pod-a")
	sockA := announced(t, a, "")

	b, runB := startInstance(t, e, "pod-b")
	sockB := announced(t, b, "")
	eventually(t, "the old instance standing by", func() bool { return a.Status().Stage == registrar.StageStandingBy })

	if err := runA.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sockA); !os.IsNotExist(err) {
		t.Errorf("the old instance left its socket %s: %v", sockA, err)
	}
	if events.removed(filepath.Base(sockA)) {
		t.Errorf("the old instance removed %s by name: the kubelet would unregister the driver", filepath.Base(sockA))
	}

	// The survivor has the last word: a new announcement, the earlier one retired.
	sockB2 := announced(t, b, sockB)
	eventually(t, "the survivor's earlier socket retired", func() bool { _, err := os.Lstat(sockB); return os.IsNotExist(err) })
	if events.removed(filepath.Base(sockB)) {
		t.Errorf("the survivor removed its earlier socket %s by name", filepath.Base(sockB))
	}

	if err := runB.stop(t); err != nil {
		t.Fatal(err)
	}
	if !events.removed(filepath.Base(sockB2)) {
		t.Errorf("the last instance did not remove %s by name: the kubelet would keep the driver registered", filepath.Base(sockB2))
	}
	left, _ := os.ReadDir(e.regDir)
	for _, f := range left {
		t.Errorf("left in the registration directory: %s", f.Name())
	}
}

// An instance that restarts in its pod keeps its birth: it stands by
// behind a newer pod instead of outbidding it.
func TestRollingUpdateRestartedInstanceDoesNotOutbid(t *testing.T) {
	e := newEnv(t)
	a, runA := startInstance(t, e, "pod-a")
	announced(t, a, "")
	b, _ := startInstance(t, e, "pod-b")
	announced(t, b, "")

	// pod-a's container restarts: a new process with the same pod UID.
	birth, err := os.ReadFile(filepath.Join(e.regDir, ".stub.csi.example.com_"+csiplugin.InstanceID("pod-a")+".birth"))
	if err != nil {
		t.Fatal(err)
	}
	if err := runA.stop(t); err != nil {
		t.Fatal(err)
	}
	// A graceful stop removes the birth file; a killed container would not:
	// put it back as a SIGKILL leaves it.
	if err := os.WriteFile(filepath.Join(e.regDir, ".stub.csi.example.com_"+csiplugin.InstanceID("pod-a")+".birth"), birth, 0o600); err != nil {
		t.Fatal(err)
	}
	a2, _ := startInstanceRegistrar(t, e, "pod-a")
	eventually(t, "the restarted older instance standing by", func() bool { return a2.Status().Stage == registrar.StageStandingBy })
	if got := b.Status().Stage; got != registrar.StageRegistered && got != registrar.StageWaitingForKubelet {
		t.Errorf("the newer instance is %s", got)
	}
}

// In the mode, a kubelet that never calls GetInfo gets a new announcement
// (a fresh socket), and the socket it never looked at is unlinked.
func TestRollingUpdateKubeletSilenceAnnouncesAgain(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	sock := filepath.Join(filepath.Dir(e.driverSock), "pod-a.sock")
	d, err := stubdriver.New(stubdriver.Options{Endpoint: "unix://" + sock, Name: stubName, NodeID: "node-1", Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d.Run)
	r, run := startRegistrarOn(t, clk, e, nil, func(o *registrar.Options) {
		o.CSIAddress, o.KubeletRegistrationPath, o.RollingUpdate = sock, sock, "pod-a"
		o.KubeletWait = registrar.MinKubeletWait
	})
	var first string
	eventually(t, "the first announcement", func() bool {
		first = r.Status().SocketPath
		return r.Status().Stage == registrar.StageWaitingForKubelet && answers(first)
	})
	clk.Fire(t, registrar.MinKubeletWait, patience)
	clk.Fire(t, time.Second, patience)
	announced(t, r, first)
	if _, err := os.Lstat(first); !os.IsNotExist(err) {
		t.Errorf("the announcement the kubelet never looked at is still there: %v", err)
	}
	if !strings.Contains(metric(r), `csi_registrar_rolling_update_decisions_total{decision="take-back"} 1`) {
		t.Errorf("metrics do not count the take-back:\n%s", metric(r))
	}
	// Alone, the instance waits for another one to appear before it leaves.
	run.cancel()
	clk.Fire(t, registrar.SuccessorWait, patience)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A socket the kubelet is registering (GetInfo answered, no Notify yet) is
// kept until its Notify is delivered, even when its instance leaves: a
// kubelet from 1.36 unregisters the driver when a Notify cannot be delivered
// (seen in CI: an undo deleted the new pod during its registration).
func TestRollingUpdateRetireLetsRegistrationFinish(t *testing.T) {
	e := newEnv(t)
	a, runA := startInstance(t, e, "pod-a")
	sockA := announced(t, a, "")
	b, _ := startInstance(t, e, "pod-b")
	announced(t, b, "")
	eventually(t, "the old instance standing by", func() bool { return a.Status().Stage == registrar.StageStandingBy })

	// The kubelet (restarted) registers A's socket again: GetInfo now, Notify later.
	conn, err := csiplugin.Dial(sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	if _, err := registrartest.GetInfo(t.Context(), client); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- runA.stop(t) }()
	// A leaves (B was confirmed after it): it says so, then would retire its
	// socket at once. It must keep it while the registration is under way:
	// give it the chance to take the socket away before the Notify.
	eventually(t, "the old instance terminating", func() bool {
		st, err := registrar.FetchInstanceState(t.Context(), sockA)
		return err == nil && st.Terminating
	})
	poll(5*time.Millisecond, time.Second, func() bool { _, err := os.Lstat(sockA); return os.IsNotExist(err) })
	if err := registrartest.Notify(t.Context(), client, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Errorf("the kubelet's NotifyRegistrationStatus on the leaving instance's socket failed: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sockA); !os.IsNotExist(err) {
		t.Errorf("the old instance left its socket %s: %v", sockA, err)
	}
}

// An instance that is leaving, with no successor yet, watches an instance
// that starts meanwhile: once the kubelet confirms that one, it leaves
// without a Remove of its socket, even while another instance (here an
// older one, whose take-back the kubelet has not registered) stays
// eligible. Seen on a real kubelet: a rollout undone while the new pod
// started; the leaving pod never saw the newest one and unlinked its socket
// by name, and the kubelet unregistered the driver for 3 s.
func TestRollingUpdateLeavingInstanceWatchesNewcomers(t *testing.T) {
	e := newEnv(t)
	events := watchDir(t, e.regDir)

	p, _ := startInstance(t, e, "pod-p")
	announced(t, p, "")
	a, runA := startInstance(t, e, "pod-a")
	sockA := announced(t, a, "")
	eventually(t, "the oldest instance standing by", func() bool { return p.Status().Stage == registrar.StageStandingBy })

	// pod-a is deleted: it waits for a successor; pod-p announces again to
	// take the registration back, and the kubelet has not got to it yet.
	runA.cancel()
	eventually(t, "the leaving instance terminating", func() bool {
		st, err := registrar.FetchInstanceState(t.Context(), sockA)
		return err == nil && st.Terminating
	})
	// The newest pod starts now, and the kubelet registers it (pod-b then
	// announces again at once when pod-a leaves: not awaited here).
	b, _ := startInstance(t, e, "pod-b")
	var sockB string
	eventually(t, "pod-b's announcement", func() bool {
		sockB = b.Status().SocketPath
		return sockB != "" && answers(sockB)
	})
	if reg, err := registrartest.Register(t.Context(), sockB); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	select {
	case <-runA.done:
	case <-time.After(patience):
		t.Fatal("the leaving instance did not return")
	}
	if events.removed(filepath.Base(sockA)) {
		t.Errorf("the leaving instance removed %s by name although pod-b was confirmed after it: the kubelet would unregister the driver", filepath.Base(sockA))
	}
	if _, err := os.Lstat(sockA); !os.IsNotExist(err) {
		t.Errorf("the leaving instance left its socket %s: %v", sockA, err)
	}
}

// A pod deleted when it is the only instance (no rollout): the DaemonSet
// controller starts its replacement at once, whose instance may start only
// after the old one got SIGTERM. The old one, alone, waits for it instead
// of unlinking its socket at once, and leaves without a Remove once the
// kubelet confirmed the replacement. Seen on kubelet v1.37.2 before: the old
// instance unlinked its socket by name 0.14 s before the replacement
// announced, and the kubelet unregistered the one and registered the other
// in the same round, losing the Node's annotation key for good.
func TestRollingUpdateDeletedPodsReplacementTakesOver(t *testing.T) {
	e := newEnv(t)
	events := watchDir(t, e.regDir)
	a, runA := startInstance(t, e, "pod-a")
	sockA := announced(t, a, "")

	runA.cancel()
	eventually(t, "the deleted pod's instance terminating", func() bool {
		st, err := registrar.FetchInstanceState(t.Context(), sockA)
		return err == nil && st.Terminating
	})
	b, _ := startInstance(t, e, "pod-b")
	announced(t, b, "")
	select {
	case <-runA.done:
	case <-time.After(patience):
		t.Fatal("the deleted pod's instance did not return")
	}
	if events.removed(filepath.Base(sockA)) {
		t.Errorf("the deleted pod's instance removed %s by name although its replacement was confirmed after it: the kubelet would unregister the driver", filepath.Base(sockA))
	}
	if _, err := os.Lstat(sockA); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's instance left its socket %s: %v", sockA, err)
	}
}

// A registrar without the mode beside an instance of the mode (a rollout
// undone past the opt-in: its pod starts while the mode's pod still runs)
// registers again when that instance leaves and unlinks its socket by name:
// the kubelet's CSI handler then unregisters the driver by name, whoever
// registered last (seen on kubelet v1.37.2: the driver stayed unregistered
// while the plain registrar reported it registered).
func TestPlainRegistrarRegistersAgainWhenAModeInstanceLeaves(t *testing.T) {
	e := newEnv(t)
	m, runM := startInstance(t, e, "pod-m")
	announced(t, m, "")

	startStubDriver(t, e, stubName)
	p, _ := startRegistrar(t, e, nil, nil)
	plain := e.regSock(stubName)
	eventually(t, "the plain socket", func() bool { return answers(plain) })
	registerNow(t, p, plain)

	// The mode's pod is deleted: no successor in the mode, so it unlinks its
	// socket by name.
	if err := runM.stop(t); err != nil {
		t.Fatal(err)
	}
	// A new socket at the same path (the inode number may be reused).
	eventually(t, "the plain registrar's socket created again", func() bool {
		return strings.Contains(metric(p), `csi_registrar_socket_creations_total{reason="other-removed"} 1`) &&
			p.Status().Stage == registrar.StageWaitingForKubelet && answers(plain)
	})
	registerNow(t, p, plain)
}
