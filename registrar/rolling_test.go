package registrar_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	mu   sync.Mutex
	evs  []fsnotify.Event
	wake chan struct{} // closed at the next event recorded
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
			if d.wake != nil {
				close(d.wake)
				d.wake = nil
			}
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

// sync waits until every file event in the directory before now is
// recorded: inotify reports a directory's events in order, so once a marker
// file's creation is seen, every earlier event is. The marker is removed.
func (d *dirEvents) sync(t *testing.T, dir string) {
	t.Helper()
	marker := filepath.Join(dir, ".sync-marker")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(marker)
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	for {
		d.mu.Lock()
		for _, ev := range d.evs {
			if filepath.Base(ev.Name) == ".sync-marker" && ev.Has(fsnotify.Create) {
				d.evs = slices.DeleteFunc(d.evs, func(e fsnotify.Event) bool { return filepath.Base(e.Name) == ".sync-marker" })
				d.mu.Unlock()
				return
			}
		}
		next := d.next()
		d.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			t.Fatal("the directory watch did not report a marker file")
		}
	}
}

// next returns a channel closed at the next event recorded. d.mu is held.
func (d *dirEvents) next() chan struct{} {
	if d.wake == nil {
		d.wake = make(chan struct{})
	}
	return d.wake
}

// instance is one instance of the mode: its registrar, its run and its log.
type instance struct {
	r    *registrar.Registrar
	run  running
	logs *registrartest.Buffer
}

// startInstance runs the reference driver on its own socket in e's driver
// directory and a registrar for it in the rolling-update mode, on the node's
// clock, a millisecond after the instance before it (births are in ms).
func startInstance(t *testing.T, e env, clk *registrar.FakeClock, podUID string, before ...func(*registrar.Registrar)) instance {
	t.Helper()
	sock := filepath.Join(filepath.Dir(e.driverSock), podUID+".sock")
	d, err := stubdriver.New(stubdriver.Options{Endpoint: "unix://" + sock, Name: stubName, NodeID: "node-1", Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d.Run)
	clk.Advance(time.Millisecond)
	return startInstanceRegistrar(t, e, clk, podUID, before...)
}

// startInstanceRegistrar runs the registrar of the instance of startInstance
// (again, as its container restarting).
func startInstanceRegistrar(t *testing.T, e env, clk *registrar.FakeClock, podUID string, before ...func(*registrar.Registrar)) instance {
	t.Helper()
	sock := filepath.Join(filepath.Dir(e.driverSock), podUID+".sock")
	logs := &registrartest.Buffer{}
	r := newRegistrar(t, clk, e, logs, func(o *registrar.Options) {
		o.CSIAddress, o.KubeletRegistrationPath, o.RollingUpdate = sock, sock, podUID
	})
	for _, f := range before {
		f(r)
	}
	run := start(t, r.Run)
	t.Cleanup(func() { // before start's: an instance alone waits successorWait
		run.cancel()
		clk.FireUntil(t, run.done, patience, registrar.SuccessorWait)
	})
	return instance{r: r, run: run, logs: logs}
}

var announceLine = regexp.MustCompile(`decision=announce reason=\S+ outcome=serving path=(\S+)`)

// serving waits until the instance logs that it serves an announcement
// socket other than not (the log line comes once it listens), and returns
// its path.
func (in instance) serving(t *testing.T, not string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	var sock string
	_, err := in.logs.Wait(ctx, func(s string) bool {
		for _, m := range announceLine.FindAllStringSubmatch(s, -1) {
			if m[1] != not {
				sock = m[1]
			}
		}
		return sock != ""
	})
	if err != nil {
		t.Fatalf("no announcement other than %q: %v", not, err)
	}
	return sock
}

// awaitStatus waits until cond holds for the instance's Status, on its changes.
func awaitStatus(t *testing.T, r *registrar.Registrar, what string, cond func(registrar.Status) bool) registrar.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	st, err := r.WaitStatus(ctx, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v (status: %s)", what, err, st)
	}
	return st
}

func stageIs(stage registrar.Stage) func(registrar.Status) bool {
	return func(st registrar.Status) bool { return st.Stage == stage }
}

// announced waits until the instance serves an announcement socket other
// than not, registers it as the kubelet does, and returns its path.
func announced(t *testing.T, in instance, not string) string {
	t.Helper()
	sock := in.serving(t, not)
	if reg, err := registrartest.Register(t.Context(), sock); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	// Its log, not its Status, which may have moved on already (a take-back).
	_, v, ok := csiplugin.ParseRollingUpdateSocketName(stubName, filepath.Base(sock))
	if !ok {
		t.Fatalf("%s is not an announcement socket of %s", sock, stubName)
	}
	confirmed := "decision=confirmed version=" + csiplugin.RollingUpdateVersion(v) + "\n"
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if _, err := in.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, confirmed) }); err != nil {
		t.Fatalf("the instance did not log that the kubelet confirmed %s: %v", filepath.Base(sock), err)
	}
	return sock
}

// terminating waits until the instance serving sock says it is terminating.
func terminating(t *testing.T, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if _, err := registrar.WaitInstanceState(ctx, sock, func(st registrar.InstanceState) bool { return st.Terminating }); err != nil {
		t.Fatalf("the instance at %s did not say it is terminating: %v", sock, err)
	}
}

// returned waits until the run returned, and returns its error.
func returned(t *testing.T, run running, what string) error {
	t.Helper()
	select {
	case <-run.done:
		return *run.err
	case <-time.After(patience):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// A rollout: the new instance announces and is confirmed, the old one
// stands by and leaves without a Remove of its socket, naming the new one
// as confirmed after it: the new one's announcement stands (no second
// announcement, no second retired registration); the last one to leave
// waits successorWait for another instance, then unregisters and leaves
// nothing of the mode behind.
func TestRollingUpdateHandover(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)

	a := startInstance(t, e, clk, "pod-a")
	sockA := announced(t, a, "")

	b := startInstance(t, e, clk, "pod-b")
	sockB := announced(t, b, "")
	awaitStatus(t, a.r, "the old instance standing by", stageIs(registrar.StageStandingBy))

	if err := a.run.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sockA); !os.IsNotExist(err) {
		t.Errorf("the old instance left its socket %s: %v", sockA, err)
	}

	// The old one named the survivor as its successor: the survivor's
	// announcement stands (checked once it heard the old one leave, and
	// again in its whole log once it returned).
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if _, err := b.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, `msg="another instance left"`) }); err != nil {
		t.Fatalf("the survivor did not see the old instance leave: %v", err)
	}
	events.sync(t, e.regDir)
	for _, s := range []string{sockA} {
		if events.removed(filepath.Base(s)) {
			t.Errorf("%s was removed by name: the kubelet would unregister the driver", filepath.Base(s))
		}
	}

	b.run.cancel()
	clk.Fire(t, registrar.SuccessorWait, patience)
	if err := returned(t, b.run, "the last instance"); err != nil {
		t.Fatal(err)
	}
	events.sync(t, e.regDir)
	if !events.removed(filepath.Base(sockB)) {
		t.Errorf("the last instance did not remove %s by name: the kubelet would keep the driver registered", filepath.Base(sockB))
	}
	if strings.Contains(b.logs.String(), "decision=take-back") {
		t.Errorf("the survivor announced again although the old instance named it as confirmed after it:\n%s", b.logs.String())
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
	clk := registrar.NewFakeClock()
	a := startInstance(t, e, clk, "pod-a")
	announced(t, a, "")
	b := startInstance(t, e, clk, "pod-b")
	announced(t, b, "")

	// pod-a's container restarts: a new process with the same pod UID.
	birthFile := filepath.Join(e.regDir, ".stub.csi.example.com_"+csiplugin.InstanceID("pod-a")+".birth")
	birth, err := os.ReadFile(birthFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.run.stop(t); err != nil {
		t.Fatal(err)
	}
	// A graceful stop removes the birth file; a killed container would not:
	// put it back as a SIGKILL leaves it. The restart comes later.
	if err := os.WriteFile(birthFile, birth, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	a2 := startInstanceRegistrar(t, e, clk, "pod-a")
	awaitStatus(t, a2.r, "the restarted older instance standing by", stageIs(registrar.StageStandingBy))
	if got := b.r.Status().Stage; got != registrar.StageRegistered && got != registrar.StageWaitingForKubelet {
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
	logs := &registrartest.Buffer{}
	r, run := startRegistrarOn(t, clk, e, logs, func(o *registrar.Options) {
		o.CSIAddress, o.KubeletRegistrationPath, o.RollingUpdate = sock, sock, "pod-a"
		o.KubeletWait = registrar.MinKubeletWait
	})
	in := instance{r: r, run: run, logs: logs}
	t.Cleanup(func() { run.cancel(); clk.FireUntil(t, run.done, patience, registrar.SuccessorWait) })
	first := in.serving(t, "")
	clk.Fire(t, registrar.MinKubeletWait, patience)
	clk.Fire(t, time.Second, patience)
	announced(t, in, first)
	if _, err := os.Lstat(first); !os.IsNotExist(err) {
		t.Errorf("the announcement the kubelet never looked at is still there: %v", err)
	}
	if !strings.Contains(metric(r), `csi_registrar_rolling_update_decisions_total{decision="take-back"} 1`) {
		t.Errorf("metrics do not count the take-back:\n%s", metric(r))
	}
	// Alone, the instance waits for another one to appear before it leaves.
	run.cancel()
	clk.Fire(t, registrar.SuccessorWait, patience)
	if err := returned(t, run, "the instance"); err != nil {
		t.Fatal(err)
	}
}

// A socket the kubelet is registering (GetInfo answered, no Notify yet) is
// kept until its Notify is delivered, even when its instance leaves: a
// kubelet from 1.36 unregisters the driver when a Notify cannot be delivered
// (seen in CI: an undo deleted the new pod during its registration).
func TestRollingUpdateRetireLetsRegistrationFinish(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	a := startInstance(t, e, clk, "pod-a")
	sockA := announced(t, a, "")
	b := startInstance(t, e, clk, "pod-b")
	announced(t, b, "")
	awaitStatus(t, a.r, "the old instance standing by", stageIs(registrar.StageStandingBy))

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
	a.run.cancel()
	// A leaves (B was confirmed after it) and retires its socket, but first
	// waits, up to NotifyWait, for the registration under way: its timer is
	// the proof that it waits, and the socket must still be there.
	terminating(t, sockA)
	clk.WaitForTimer(t, registrar.NotifyWait, patience)
	if _, err := os.Lstat(sockA); err != nil {
		t.Errorf("the leaving instance's socket is gone while the kubelet registers it: %v", err)
	}
	if err := registrartest.Notify(t.Context(), client, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Errorf("the kubelet's NotifyRegistrationStatus on the leaving instance's socket failed: %v", err)
	}
	if err := returned(t, a.run, "the leaving instance"); err != nil {
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
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)

	p := startInstance(t, e, clk, "pod-p")
	announced(t, p, "")
	a := startInstance(t, e, clk, "pod-a")
	sockA := announced(t, a, "")
	awaitStatus(t, p.r, "the oldest instance standing by", stageIs(registrar.StageStandingBy))

	// pod-a is deleted: it waits for a successor; pod-p announces again to
	// take the registration back, and the kubelet has not got to it yet.
	a.run.cancel()
	terminating(t, sockA)
	// The newest pod starts now, and the kubelet registers it (pod-b then
	// announces again at once when pod-a leaves: not awaited here).
	b := startInstance(t, e, clk, "pod-b")
	sockB := b.serving(t, "")
	if reg, err := registrartest.Register(t.Context(), sockB); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	if err := returned(t, a.run, "the leaving instance"); err != nil {
		t.Fatal(err)
	}
	events.sync(t, e.regDir)
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
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	a := startInstance(t, e, clk, "pod-a")
	sockA := announced(t, a, "")

	a.run.cancel()
	terminating(t, sockA)
	b := startInstance(t, e, clk, "pod-b")
	announced(t, b, "")
	if err := returned(t, a.run, "the deleted pod's instance"); err != nil {
		t.Fatal(err)
	}
	events.sync(t, e.regDir)
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
	clk := registrar.NewFakeClock()
	m := startInstance(t, e, clk, "pod-m")
	announced(t, m, "")

	startStubDriver(t, e, stubName)
	p, _ := startRegistrarOn(t, clk, e, nil, nil)
	plain := e.regSock(stubName)
	awaitStatus(t, p, "the plain socket served", stageIs(registrar.StageWaitingForKubelet))
	registerPlain(t, p, plain)

	// The mode's pod is deleted: no successor in the mode (it waits
	// successorWait for one), so it unlinks its socket by name.
	m.run.cancel()
	clk.Fire(t, registrar.SuccessorWait, patience)
	if err := returned(t, m.run, "the mode's instance"); err != nil {
		t.Fatal(err)
	}
	// The plain registrar registers again once the kubelet's deregistration
	// passed: a new socket at the same path.
	clk.Fire(t, registrar.KubeletSettle, patience)
	awaitStatus(t, p, "the plain registrar's socket created again", stageIs(registrar.StageWaitingForKubelet))
	if !strings.Contains(metric(p), `csi_registrar_socket_creations_total{reason="other-removed"} 1`) {
		t.Errorf("the plain registrar's re-creation is not counted as other-removed:\n%s", metric(p))
	}
	registerPlain(t, p, plain)
}

// registerPlain registers the plain registrar's socket as the kubelet does
// and waits for the stage.
func registerPlain(t *testing.T, r *registrar.Registrar, sock string) {
	t.Helper()
	if reg, err := registrartest.Register(t.Context(), sock); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	awaitStatus(t, r, "registered", stageIs(registrar.StageRegistered))
}

// After a node reboot the mode's last announcements are dead sockets on
// disk, which the kubelet, walking its directory at start, adds to its
// desired state and dials. No kubelet running now can have registered them
// (a socket enters the plugin manager's actual state only after it answered
// GetInfo), so an instance that starts unlinks them by name: the kubelet
// drops them from its desired state instead of redialing them until it
// restarts. Here the node "booted" after the sockets were made.
func TestRollingUpdateRemovesPreBootSocketsByName(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	dead := []string{
		filepath.Join(e.regDir, csiplugin.RollingUpdateSocketName(stubName, csiplugin.InstanceID("pod-old"), 5)),
		filepath.Join(e.regDir, csiplugin.RollingUpdateSocketName(stubName, csiplugin.InstanceID("pod-a"), 6)),
	}
	for _, p := range dead {
		registrartest.StaleSocket(t, p)
	}
	boot := time.Now().Add(time.Hour)
	a := startInstance(t, e, clk, "pod-a", func(r *registrar.Registrar) { r.UseBootTime(boot) })
	// Without the rule, the other instance's dead socket is watched and the
	// first announcement waits for its first state on the fake clock.
	a.serving(t, "")
	events.sync(t, e.regDir)
	for _, p := range dead {
		if !events.removed(filepath.Base(p)) {
			t.Errorf("%s, dead and made before the boot, was not removed by name", filepath.Base(p))
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", filepath.Base(p), err)
		}
	}
}

// A dead socket of this instance made since the boot (its container was
// killed; the kubelet may hold it as registered) is removed through a
// hidden name, never by name: the kubelet would unregister the driver.
func TestRollingUpdateRemovesDeadSocketSinceBootHidden(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	dead := filepath.Join(e.regDir, csiplugin.RollingUpdateSocketName(stubName, csiplugin.InstanceID("pod-a"), 6))
	registrartest.StaleSocket(t, dead)
	boot := time.Now().Add(-time.Hour)
	a := startInstance(t, e, clk, "pod-a", func(r *registrar.Registrar) { r.UseBootTime(boot) })
	a.serving(t, "")
	events.sync(t, e.regDir)
	if events.removed(filepath.Base(dead)) {
		t.Errorf("%s, made since the boot, was removed by name: the kubelet would unregister the driver", filepath.Base(dead))
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", filepath.Base(dead), err)
	}
}

// An error that ends Run in the mode (here the driver comes back under
// another name) enters the same leaving stage as the end of ctx: alone, the
// instance waits successorWait for a successor, then unregisters, and Run
// returns the error.
func TestRollingUpdateErrorLeavesFirst(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	sock := filepath.Join(filepath.Dir(e.driverSock), "pod-a.sock")
	stop := serveNamedDriver(t, sock, &namedDriver{name: stubName})
	a := startInstanceRegistrar(t, e, clk, "pod-a")
	sockA := announced(t, a, "") // asked: an unasked one would go at once
	stop()
	serveNamedDriver(t, sock, &namedDriver{name: "two.example.com"})
	// Leaving: the instance says so and waits for a successor. A look at
	// the driver that comes while it restarts fails and is tried again
	// after a backoff on the clock: fire those.
	said := make(chan struct{})
	go func() {
		defer close(said)
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		registrar.WaitInstanceState(ctx, sockA, func(st registrar.InstanceState) bool { return st.Terminating })
	}()
	clk.FireUntil(t, said, patience, 100*time.Millisecond, 200*time.Millisecond, 400*time.Millisecond)
	terminating(t, sockA)
	clk.Fire(t, registrar.SuccessorWait, patience)
	err := returned(t, a.run, "the instance")
	if err == nil || !strings.Contains(err.Error(), "registers one name for its life") {
		t.Errorf("Run = %v, want the error of the renamed driver", err)
	}
	events.sync(t, e.regDir)
	if !events.removed(filepath.Base(sockA)) {
		t.Errorf("the instance, alone, did not unregister (remove %s by name) before Run returned", filepath.Base(sockA))
	}
}

// An announcement the kubelet never asked goes by name, not through a hidden
// name, when it is retired: the kubelet never registered it (a socket enters
// the plugin manager's actual state only after it answered GetInfo), so the
// Remove only takes it out of the desired state, where a hidden name would
// leave it to be redialed until the kubelet restarts. The asked one still
// goes through a hidden name.
func TestRollingUpdateUnaskedAnnouncementGoesByName(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	events := watchDir(t, e.regDir)
	p := startInstance(t, e, clk, "pod-p")
	sockP1 := announced(t, p, "")

	// A registrar without the mode removes the driver's plain socket by
	// name: pod-p takes the registration back at once at that path, with a
	// new announcement the kubelet never asks here; the registered one is
	// kept until the new one is confirmed.
	plain := e.regSock(stubName)
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
	sockP2 := p.serving(t, sockP1)
	if sockP2 != plain {
		t.Fatalf("pod-p announced again at %s, want the removed plain path %s", sockP2, plain)
	}

	// A newer pod is registered: pod-p stands by.
	b := startInstance(t, e, clk, "pod-b")
	announced(t, b, "")
	awaitStatus(t, p.r, "pod-p standing by", stageIs(registrar.StageStandingBy))

	// pod-p is deleted: pod-b was confirmed after it, so it retires its sockets.
	p.run.cancel()
	if err := returned(t, p.run, "pod-p"); err != nil {
		t.Fatal(err)
	}
	events.sync(t, e.regDir)
	if !events.removed(filepath.Base(sockP2)) {
		t.Errorf("%s, never asked by the kubelet, was not removed by name: the kubelet would redial it", filepath.Base(sockP2))
	}
	if events.removed(filepath.Base(sockP1)) {
		t.Errorf("%s, registered, was removed by name: the kubelet would unregister the driver", filepath.Base(sockP1))
	}
	// (The plain path's name carries no instance: pod-b may take pod-p's
	// unlink of it for a registrar without the mode leaving and announce
	// there again, a needless registration of its own endpoint.)
	if _, err := os.Lstat(sockP1); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", filepath.Base(sockP1), err)
	}
}

// Our announcement deleted by someone: served again at once at the same
// path with the same version (no settle, no new announcement), as without
// the mode; the kubelet's per-path ordering unregisters the deleted one
// before it registers the new one. A peer standing by keeps standing by.
func TestRollingUpdateOwnSocketDeletedRecreatedAtItsPath(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	a := startInstance(t, e, clk, "pod-a")
	announced(t, a, "")
	b := startInstance(t, e, clk, "pod-b")
	sockB := announced(t, b, "")
	awaitStatus(t, a.r, "the old instance standing by", stageIs(registrar.StageStandingBy))

	if err := os.Remove(sockB); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	recreated := "reason=deleted outcome=serving path=" + sockB + " "
	if _, err := b.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, recreated) }); err != nil {
		t.Fatalf("the instance did not serve its deleted announcement again at %s: %v", sockB, err)
	}
	if reg, err := registrartest.Register(t.Context(), sockB); err != nil || reg.Err != nil {
		t.Fatal(err, reg)
	}
	awaitStatus(t, b.r, "the instance registered again", stageIs(registrar.StageRegistered))
	if _, err := a.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, `event="peer moved"`) }); err != nil {
		t.Fatalf("the older instance did not follow the newer one to its re-created socket: %v", err)
	}
	if strings.Contains(b.logs.String(), "reason=take-back") {
		t.Errorf("the instance made a new announcement instead of serving the deleted one again:\n%s", b.logs.String())
	}
	if st := a.r.Status().Stage; st != registrar.StageStandingBy {
		t.Errorf("the older instance is at stage %v, want %v (the newer one moved, it did not leave)", st, registrar.StageStandingBy)
	}
	if strings.Contains(a.logs.String(), "decision=take-back") {
		t.Errorf("the older instance took the registration back although the newer one only moved:\n%s", a.logs.String())
	}
}
