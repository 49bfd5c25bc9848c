package pluginmanager

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// lostRaceHandler is the CSI handler of a restarted kubelet whose two
// registrations of one driver interleave the worst way: the older instance
// (second) passes validation while the handler holds nothing, then its
// endpoint is stored after the newer instance's (first). Operations on two
// sockets run concurrently and validate-then-set is not atomic, so a real
// kubelet can do this; it cannot be made to. Here second's validation waits
// until first is registered, and the store forgets first for that
// validation: the state and the two NotifyRegistrationStatus(true) are what
// the race leaves.
type lostRaceHandler struct {
	handler
	name, first, second string
	firstDone           chan struct{}
	forced              chan struct{}
	once1, once2        sync.Once
}

func (h *lostRaceHandler) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	if endpoint == h.second {
		select {
		case <-h.firstDone:
			h.once2.Do(func() { kubeletDrivers.Delete(h.name) })
		case <-time.After(10 * time.Second):
		}
	}
	return h.handler.ValidatePlugin(ctx, name, endpoint, versions)
}

func (h *lostRaceHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	err := h.handler.RegisterPlugin(ctx, name, endpoint, versions, timeout)
	switch endpoint {
	case h.first:
		h.once1.Do(func() { close(h.firstDone) })
	case h.second:
		if err == nil {
			select {
			case <-h.forced:
			default:
				close(h.forced)
			}
		}
	}
	return err
}

// Scenario 3: the kubelet restarts while A and B both run. The restarted
// plugin manager registers both sockets; here B's first and A's last, with
// A's validation before B's endpoint was stored (lostRaceHandler): the
// handler ends on A's endpoint, and both were confirmed.
//
// Covers onPeerEvent's take-back when "the kubelet confirmed an older
// instance after this one" (B announces again, higher) and rollNotify's
// confirmation of an older instance while a newer one runs (A stands by,
// does not hold on). Without the take-back the handler stays on A's
// endpoint, which ends with A's pod.
func TestKubeletRestart(t *testing.T) {
	w := newWorld(t, "restart.csi.test")
	ad, bd := w.driver("a", false), w.driver("b", false)
	a := startInstance(t, "a", ad, w.reg, "pod-a")
	waitStage(w, a, registerWait, registrar.StageRegistered)
	b := startInstance(t, "b", bd, w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRegistered)
	waitStage(w, a, 5*time.Second, registrar.StageStandingBy)
	w.waitEndpoint(5*time.Second, "b")

	// The kubelet restarts: its plugin manager stops, its memory is lost
	// (the API objects stay), a new one walks the directory.
	w.pm.halt()
	kubeletDrivers.Delete(w.name)
	race := &lostRaceHandler{handler: w.h, name: w.name, first: bd.sock, second: ad.sock,
		firstDone: make(chan struct{}), forced: make(chan struct{})}
	restart := time.Now()
	w.pm = startPluginManager(t, w.reg, race, kubeletPeriod)

	select {
	case <-race.forced:
	case <-time.After(registerWait):
		t.Fatalf("the restarted kubelet did not register A after B")
	}
	if got := w.endpoint(); got != "a" {
		t.Logf("right after the forced order the handler dials %q (B may have taken it back already)", got)
	}
	w.waitEndpoint(registerWait, "b")
	w.pm.waitRounds(t, settleRounds)
	if got := w.endpoint(); got != "b" {
		t.Errorf("after the restart the CSI handler dials %q, want b", got)
	}
	if st := b.r.Status().Stage; st != registrar.StageRegistered {
		t.Errorf("B is at stage %v, want %v", st, registrar.StageRegistered)
	}
	if st := a.r.Status().Stage; st != registrar.StageStandingBy {
		t.Errorf("A is at stage %v, want %v", st, registrar.StageStandingBy)
	}
	if n := w.h.count("deregister", "", time.Time{}); n != 0 {
		t.Errorf("DeRegisterPlugin was called %d times, want 0", n)
	}
	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times, want never", g)
	}
	if n := w.h.count("register", bd.sock, restart); n < 2 {
		t.Errorf("B was registered %d times since the restart, want at least 2 (the restart's, then its take-back)", n)
	}
}

// childRegistrar is a registrar in a process of its own (the test binary
// run with childEnv), which can be killed with SIGKILL.
type childRegistrar struct {
	cmd  *exec.Cmd
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
	c := &childRegistrar{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(c.kill)
	return c
}

// kill sends SIGKILL: nothing of the registrar's cleanup runs.
func (c *childRegistrar) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.done <- nil // later kills return at once
}

// Scenario 4: A's registrar is killed (SIGKILL: its socket stays, nothing
// retires it); B, which holds the registration, has the last word; A's
// container restarts (same pod UID, same birth file) and does not outbid B.
//
// Covers onPeerEvent's "instance left" take-back (B announces again after
// A's stream ends without a Remove), readBirth (the restarted A keeps its
// pod's birth, so B stays newer: without the birth file A would count as a
// newer pod and take the registration), and rollBegin's removal of the
// dead socket of A's previous container through a hidden name
// (sockfile.RemoveDead: the kubelet, which holds that socket as
// registered, sees no Remove; an unlink by name would make it unregister
// the driver).
func TestKilledInstance(t *testing.T) {
	w := newWorld(t, "killed.csi.test")
	ad, bd := w.driver("a", false), w.driver("b", false)
	aOpts := registrarOptions(ad, w.reg, "pod-a")
	a := startChild(t, "a", aOpts)
	w.waitEndpoint(registerWait, "a")

	b := startInstance(t, "b", bd, w.reg, "pod-b")
	waitStage(w, b, registerWait, registrar.StageRegistered)
	w.waitEndpoint(5*time.Second, "b")
	// A's socket as SIGKILL leaves it, taken once the instances settled: A
	// may have announced again meanwhile (when the kubelet confirms A after
	// B started, B takes the registration back by replacing its socket,
	// which A may see as B leaving; seen once in `make test-pluginmanager`).
	w.pm.waitRounds(t, settleRounds)
	var aFirst []string
	w.eventually(registerWait, "A with one socket", func() bool {
		aFirst = ownSockets(w, "pod-a")
		return len(aFirst) == 1
	})
	w.waitEndpoint(5*time.Second, "b")
	confirmedBefore := b.r.Status().Since

	a.kill()
	if _, err := os.Stat(filepath.Join(w.reg, aFirst[0])); err != nil {
		t.Fatalf("A's socket after SIGKILL: %v (want it left behind)", err)
	}
	// B announces again: the last announcement on the node is the survivor's.
	w.eventually(registerWait, "B confirmed again after A's death", func() bool {
		st := b.r.Status()
		return st.Stage == registrar.StageRegistered && st.Since.After(confirmedBefore)
	})
	w.waitEndpoint(5*time.Second, "b")

	// A's container restarts in the same pod.
	restart := time.Now()
	startChild(t, "a'", aOpts)
	w.eventually(registerWait, "the restarted A removed its previous container's socket", func() bool {
		_, err := os.Stat(filepath.Join(w.reg, aFirst[0]))
		return os.IsNotExist(err)
	})
	// Its discovery wait (2 s, two rounds at the kubelet's period), then
	// the kubelet's rounds.
	w.pm.waitRounds(t, 2+settleRounds)
	if n := w.h.count("validate", ad.sock, restart); n != 0 {
		t.Errorf("the restarted A announced (%d validations of its endpoint): it outbid the newer pod", n)
	}
	if got := w.endpoint(); got != "b" {
		t.Errorf("the CSI handler dials %q, want b", got)
	}
	if n := w.h.count("deregister", "", time.Time{}); n != 0 {
		t.Errorf("DeRegisterPlugin was called %d times, want 0", n)
	}
	if g := gaps(w.writes()); g != 0 {
		t.Errorf("the CSINode lost the driver %d times, want never", g)
	}
	if st := b.r.Status().Stage; st != registrar.StageRegistered {
		t.Errorf("B is at stage %v, want %v", st, registrar.StageRegistered)
	}
}

// holder is a registration socket of a dead instance that the kubelet
// registered with a version above what a live instance announces next:
// what an instance whose clock ran ahead leaves, once it died and its
// socket was removed through a hidden name (the kubelet keeps it).
type holder struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint, version string
	notified                chan bool
}

func (h *holder) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: h.name, Endpoint: h.endpoint,
		SupportedVersions: []string{h.version}}, nil
}

func (h *holder) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	select {
	case h.notified <- st.PluginRegistered:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Scenario 5: the kubelet rejects each of A's announcements in validation
// (it holds a higher version, from a dead instance). A rejection is not a
// registration: each rejected socket is unlinked (the kubelet, which keeps
// a rejected socket in its desired state, would otherwise validate it
// again and again with its backoff), and the kubelet's validation of a
// socket is never taken as the kubelet retrying by itself.
//
// Covers rollNotify's withdraw (closeSocket on a rejection "in
// validation", no Failed mark, the registrar's backoff before the next
// announcement), onRegistrationSocketEvent's rule that the Remove of our
// own withdrawn announcement is no "path freed, create now" (else one
// announcement per kubelet round, forever), and onGetInfo's rule that the
// rolling-update mode infers nothing about the kubelet's retries. Without
// the unlink the plugin manager validates one announcement several times;
// with the inference, Status.KubeletRetry turns "retries itself" and the
// registrar stops announcing.
func TestValidationRejection(t *testing.T) {
	w := newWorld(t, "rejected.csi.test")
	hd, ad := w.driver("h", false), w.driver("a", false)

	// The dead instance's registration: served, registered, then removed
	// through a hidden name as sockfile.RemoveDead removes it.
	held := uint64(time.Now().Add(24 * time.Hour).UnixMilli())
	hs := &holder{name: w.name, endpoint: hd.sock, version: csiplugin.RollingUpdateVersion(held), notified: make(chan bool, 1)}
	hpath := filepath.Join(w.reg, csiplugin.RollingUpdateSocketName(w.name, csiplugin.InstanceID("pod-dead"), held))
	ln, err := net.Listen("unix", hpath)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, hs)
	go func() { _ = g.Serve(ln) }()
	select {
	case ok := <-hs.notified:
		if !ok {
			t.Fatal("the kubelet did not register the holder")
		}
	case <-time.After(registerWait):
		t.Fatal("the kubelet did not call the holder")
	}
	g.GracefulStop() // after the answer to NotifyRegistrationStatus: an undelivered one unregisters
	hidden := filepath.Join(w.reg, ".dead-holder")
	if err := os.Rename(hpath, hidden); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hidden); err != nil {
		t.Fatal(err)
	}
	w.waitEndpoint(5*time.Second, "h")

	start, startRound := time.Now(), w.pm.round()
	a := startInstance(t, "a", ad, w.reg, "pod-a")
	// The registrar's backoff after a rejection: 1 s, 2 s, 4 s …
	w.eventually(20*time.Second, "three announcements of A rejected in validation", func() bool {
		return w.h.count("validate", ad.sock, start) >= 3
	})
	// Backoff: announcements about 1, 3, 7 s after the first rejection
	// (each validated within a kubelet round), not one per round: in a
	// window of 10 rounds from A's start (10 s at the kubelet's period),
	// at most 5.
	w.pm.waitRound(t, startRound+10+1)
	if n := w.h.count("validate", ad.sock, start); n > 5 {
		t.Errorf("A's announcements were validated %d times within 10 kubelet rounds of its start: no backoff between rejections", n)
	}

	perVersion := map[string]int{}
	w.h.mu.Lock()
	for _, c := range w.h.calls {
		if c.op == "validate" && c.endpoint == ad.sock && !c.at.Before(start) {
			perVersion[c.version]++
			if c.err == nil {
				t.Errorf("the kubelet accepted A's announcement %s, want every one rejected in validation", c.version)
			}
		}
	}
	w.h.mu.Unlock()
	for v, n := range perVersion {
		if n > 1 {
			t.Errorf("the kubelet validated A's announcement %s %d times: the rejected socket was left for it to retry", v, n)
		}
	}
	if k := a.r.Status().KubeletRetry; k != registrar.KubeletRetryUnknown {
		t.Errorf("A inferred %v about the kubelet's retries from validation rejections, want %v", k, registrar.KubeletRetryUnknown)
	}
	if st := a.r.Status().Stage; st != registrar.StageRejected && st != registrar.StageWaitingForKubelet {
		t.Errorf("A is at stage %v, want rejected (announcing again) or waiting for the kubelet", st)
	}
	if n := w.h.count("deregister", "", time.Time{}); n != 0 {
		t.Errorf("DeRegisterPlugin was called %d times, want 0: a rejected socket is not registered", n)
	}
	if got := w.endpoint(); got != "h" {
		t.Errorf("the CSI handler dials %q, want the holder's endpoint h", got)
	}
	var left []string
	for _, n := range ownSockets(w, "pod-a") {
		v := strings.TrimSuffix(n[strings.LastIndex(n, "_")+1:], "-reg.sock")
		if perVersion["1."+v+".0"] > 0 {
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		t.Errorf("rejected announcements still in the registration directory: %v", left)
	}
}
