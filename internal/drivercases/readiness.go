package drivercases

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The mode-readiness cases: is the driver ready for csi-registrar's
// rolling-update mode, where two instances of it run on a node during a
// rollout? They run by default on manifests that turn the mode on, and on
// any manifests when chosen (Options.Cases).
const (
	CaseModeManifests   = "R1_mode_manifests"
	CaseVolumesAcross   = "R2_volumes_across_instances"
	CaseOwnSocket       = "R3_own_csi_socket"
	CaseServesAfterTerm = "R4_serves_after_sigterm"
)

// ReadinessCases are the mode-readiness cases, in the order they run.
func ReadinessCases() []string {
	return []string{CaseModeManifests, CaseVolumesAcross, CaseOwnSocket, CaseServesAfterTerm, CaseNewerDriverFails}
}

// Readiness settings.
const (
	// acrossVolumes is how many inline volumes R2 publishes through the old
	// instance.
	acrossVolumes = 3
	// minServeAfterTerm is how long R4 wants the driver to serve after
	// SIGTERM ("a few seconds": the reference driver serves 5 s).
	minServeAfterTerm = 3 * time.Second
	// serveWatch bounds R4's watch of the terminating instance.
	serveWatch = 10 * time.Second
	// listingWait bounds R2's wait for one listing of the socket directory
	// after the old pod is gone (a listing is an exec on the node, every
	// 300 ms).
	listingWait = 10 * time.Second
)

// notJudged ends the case with VerdictNotJudged and why (what verify would
// need): never pass.
func (c *check) notJudged(format string, args ...any) {
	c.verdict = report.VerdictNotJudged
	msg := fmt.Sprintf(format, args...)
	c.addNote(msg)
	c.Logf("not judged: %s", msg)
	panic(stop{})
}

// R1. The manifests, before anything rolls: a pod that binds a port on the
// node cannot run beside its successor (the rollout stalls with the new
// pod Pending); with the mode, maxSurge 0 or one CSI socket path for every
// pod keep the mode from handing over. Without the mode: not judged, with
// what the mode would need.
func (s *suite) modeManifests(t *check) {
	f := checkModeManifests(s.d.spec)
	if f.Ports != "" {
		s.blockRoll = f.Ports
		t.Errorf("%s. See %s", f.Ports, ReadinessDoc)
	}
	for _, b := range f.Blocking {
		t.Errorf("%s. See %s", b, ReadinessDoc)
	}
	if t.failed {
		return
	}
	if len(f.Needs) > 0 {
		t.notJudged("the manifests do not turn on the rolling-update mode; it would need: %s. See %s", strings.Join(f.Needs, "; "), ReadinessDoc)
	}
	t.Logf("no host port, a CSI socket per pod, a surge: the new pod can run beside the old one")
}

// socketFor is the driver's CSI socket of pod on the node.
func (s *suite) socketFor(pod *corev1.Pod) string {
	sock := s.d.spec.HostSocket
	if sock == "" {
		sock = s.d.spec.RegistrationPath
	}
	return driverspec.ExpandForPod(sock, pod, s.d.spec.Registrar)
}

// R2. A volume published through the old instance is unpublished through
// the new one, as the kubelet does across a rollout: inline-volume pods run
// (published by the instance registered now); the workload rolls with the
// new pod's registrar held back (readiness_overlap.go), and once the new
// pod's driver serves, more inline-volume pods run, published through the
// old instance still (the kubelet's endpoint switches only when the new
// registrar announces); the rollout ends (the old pod gone: the kubelet's
// endpoint is the new instance's), the pods are deleted and the kubelet
// must tear all their volumes down through the new instance. NodeGetInfo
// must agree on both instances. It records the driver's socket directory
// meanwhile for R3.
func (s *suite) volumesAcross(t *check) {
	ctx, n, _ := s.begin(t)
	d := s.d
	if s.blockRoll != "" {
		t.Skipf("R1: %s", s.blockRoll)
	}
	if d.spec.Workload.OnDelete() {
		t.notJudged("%s has updateStrategy OnDelete: a template change rolls out nothing", d.spec.Workload)
	}
	if why := s.inlineVolumes(ctx); why != "" {
		t.notJudged("%s: verify publishes CSI inline volumes (a pod's spec.volumes[].csi naming the driver, no attributes); to judge it, the driver needs a CSIDriver with volumeLifecycleModes Ephemeral whose volumes need no attributes. What R2 checks by hand: publish a volume, roll the node plugin, delete the pod: the volume must be torn down. See %s", why, ReadinessDoc)
	}
	load := s.newMountLoad(t, ctx, []string{n})
	pods := load.Client.CoreV1().Pods(load.Namespace)
	groups := acrossGroups{}
	publish := func(prefix string) []string {
		var uids []string
		for i := range acrossVolumes {
			p, err := pods.Create(ctx, load.pod(fmt.Sprintf("%s-%d", prefix, i), n), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			uids = append(uids, string(p.UID))
		}
		return uids
	}
	groups.before = publish("across")
	if why := s.awaitLoadRunning(ctx, load, acrossVolumes); why != "" {
		t.notJudged("%s: verify cannot invent the volume attributes or the setup your driver needs for an inline volume. See %s", why, ReadinessDoc)
	}
	old := s.podOn(t, ctx, n)
	oldSock := s.socketFor(old)
	oldInfo, oldErr := s.askInstance(ctx, n, oldSock)
	t.Logf("%d volumes published through the old instance (pod %s, socket %s) before the rollout", acrossVolumes, old.Name, oldSock)

	was, err := s.podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var samp *socketSampler
	if d.spec.HostSocket != "" && perPod(d.spec.HostSocket) {
		samp = s.sampleSockets(ctx, n, path.Dir(oldSock), old)
	}
	// The sampler stops once, here or when the case ends early.
	var samples []socketSample
	sampling := samp != nil
	stopSampling := func() []socketSample {
		if sampling {
			sampling, samples = false, samp.stop()
		}
		return samples
	}
	defer stopSampling()
	t0 := time.Now()
	overlapUnjudged := false
	if why := s.rollHeld(t, ctx, "readiness-"+t0.UTC().Format(time.RFC3339Nano)); why != "" {
		t.addNote("no volume published during the overlap: " + why)
		t.Logf("no volume published during the overlap (the old instance's, the new one's driver running): %s", why)
	} else {
		var rev reverseResult
		groups.during, rev, overlapUnjudged = s.publishInOverlap(t, ctx, n, oldSock, was, load, func() []string { return publish("overlap") })
		defer rev.report(t) // after the verdict on the old instance's volumes, also when it ends the case
	}
	done, err := s.awaitRolledOut(ctx, was, rolloutWait+overlapHold)
	if err != nil {
		stopSampling()
		t.Fatal(err)
	}
	what := "template change -> rolled out (the old pod gone: the kubelet calls the new instance)"
	if len(groups.during) > 0 {
		what = fmt.Sprintf("template change -> rolled out (the new pod's registrar held %s; the old pod gone: the kubelet calls the new instance)", overlapHold)
	}
	t.measure(what, done.Sub(t0))
	nw := s.podOn(t, ctx, n)
	newSock := s.socketFor(nw)
	if samp != nil {
		// The old pod is gone: its instance exited, and removed what it
		// removes, before. One listing after that shows the directory as it
		// left it.
		if !samp.awaitListingAfter(ctx, done, listingWait) {
			t.addNote(fmt.Sprintf("no listing of the socket directory after the old pod was gone (within %s)", listingWait))
		}
		s.sockets = &socketRecord{samples: stopSampling(), old: path.Base(oldSock), new: path.Base(newSock), t0: t0}
	}
	newInfo, newErr := s.askInstance(ctx, n, newSock)
	switch {
	case oldErr != nil || newErr != nil:
		t.Logf("NodeGetInfo not compared: old instance: %v; new instance: %v", oldErr, newErr)
		t.addNote("NodeGetInfo not compared (verify cannot dial the node's sockets here)")
	default:
		if why := infoDiffers(oldInfo, newInfo); why != "" {
			t.Errorf("NodeGetInfo disagrees between the instances (%s): the kubelet registered the node with the old one's answer and now calls the new one. Both instances must report the same node: derive the node ID and topology from the node, not from the process or the pod. See %s", why, ReadinessDoc)
		} else {
			t.Logf("NodeGetInfo agrees on both instances: node ID %q", newInfo.Node.GetNodeId())
		}
	}

	deleted := time.Now()
	if err := load.DeleteAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := load.AwaitNoPods(ctx, podWait); err != nil {
		t.Fatal(err)
	}
	td, err := s.awaitPodDirsGone(ctx, map[string][]string{n: groups.all()}, shortWait, deleted)
	if err != nil {
		t.Fatal(err)
	}
	if len(td.Left) > 0 {
		t.Errorf("%s", acrossText(td, groups))
		return
	}
	t.Logf("the new instance (pod %s) unpublished the %d volumes the old instance (pod %s) published (%d before the rollout, %d while both instances ran)", nw.Name, td.Of, old.Name, len(groups.before), len(groups.during))
	if overlapUnjudged {
		t.verdict = report.VerdictNotJudged
	}
}

// publishInOverlap waits for the new pod's driver to serve, then runs the
// inline-volume pods that publish makes and waits until they run: the old
// instance publishes them, since the new pod's registrar is held. It
// returns their pod UIDs, or none (with what verify could not check) when
// the hold ended before they ran; unjudged when the old instance's socket
// was gone (R3's finding, not R2's). Meanwhile, both instances running, it
// tries the reverse direction (readiness_reverse.go).
func (s *suite) publishInOverlap(t *check, ctx context.Context, n, oldSock string, was map[types.UID]bool, load *mountLoad, publish func() []string) (uids []string, rev reverseResult, unjudged bool) {
	nw, err := s.awaitNewDriver(ctx, n, was, podWait)
	if err != nil {
		t.Error(err)
		return nil, rev, false
	}
	newSock := s.socketFor(nw)
	t.Logf("the new pod %s's driver serves (socket %s), its registrar held: publishing %d volumes through the old instance", nw.Name, newSock, acrossVolumes)
	uids = publish()
	defer func() { rev = s.reverseDirection(ctx, n, oldSock, newSock) }()
	if why := s.awaitLoadRunning(ctx, load, 2*acrossVolumes); why != "" {
		if out, err := s.cl.Node.NodeSh(ctx, n, `[ -S "$1" ] && echo yes; true`, oldSock); err == nil && out == "" {
			t.addNote(fmt.Sprintf("the volumes published during the overlap are not judged: the old instance's socket %s was gone while its pod ran (R3 says who removed it): %s", path.Base(oldSock), why))
			t.Logf("overlap volumes not judged: the old instance's socket %s is gone (%s)", oldSock, why)
			return nil, rev, true
		}
		t.Errorf("the old instance did not publish inline volumes while the new instance's driver ran beside it (%s): the kubelet calls the old instance until the new one is confirmed. See %s", why, ReadinessDoc)
		return uids, rev, false
	}
	started, err := s.registrarStarted(ctx, nw)
	switch {
	case err != nil:
		t.Error(&VerifyError{Err: fmt.Errorf("whether the new pod %s's registrar had started: %w", nw.Name, err)})
		return nil, rev, false
	case started:
		t.Error(&VerifyError{Err: fmt.Errorf("the new pod %s's registrar started (held %s) before the %d overlap volumes were published: they may be the new instance's; not judged", nw.Name, overlapHold, acrossVolumes)})
		return nil, rev, false
	}
	t.Logf("%d volumes published through the old instance while the new instance's driver ran (its registrar not started yet)", acrossVolumes)
	return uids, rev, false
}

// acrossGroups are R2's inline-volume pods (UIDs): published before the
// rollout, and during the overlap (the new instance's driver running).
type acrossGroups struct{ before, during []string }

func (g acrossGroups) all() []string { return append(slices.Clone(g.before), g.during...) }

// left counts the UIDs of uids among td's pods left (node/uid).
func left(td teardown, uids []string) int {
	n := 0
	for _, nu := range td.Left {
		_, u, _ := strings.Cut(nu, "/")
		if slices.Contains(uids, u) {
			n++
		}
	}
	return n
}

// acrossText is R2's verdict: the driver's answer, its cause and the fix.
// A driver that knows the volumes published before the new instance
// started, and not those published during the overlap, reads the node's
// state once at start.
func acrossText(td teardown, g acrossGroups) string {
	codes := map[string]bool{}
	for _, c := range td.Causes {
		codes[c.Code] = true
	}
	answer := "did not tear down"
	if len(codes) == 1 && td.Causes[0].Code != "" {
		answer = "returned " + td.Causes[0].Code + " for"
	}
	msg := fmt.Sprintf("NodeUnpublishVolume on the new instance %s %d of %d volumes the old instance published", answer, len(td.Left), td.Of)
	lb, ld := left(td, g.before), left(td, g.during)
	if len(g.during) > 0 {
		msg += fmt.Sprintf(" (%d of %d published before the new instance started, %d of %d while both instances ran)", lb, len(g.before), ld, len(g.during))
	}
	if c := causesByAnswer(td.Causes); len(c) > 0 {
		msg += " (" + strings.Join(c, "; ") + ")"
	} else {
		msg += fmt.Sprintf(" within %s (the kubelet's log names no NodeUnpublishVolume error for them)", td.Within)
	}
	const fix = " Fix: keep what NodeUnpublishVolume needs on the node (a hostPath directory both pods mount, or the mount table), read it on each call, not once at start; an unpublish of a target that is not mounted succeeds (NodeUnpublishVolume is idempotent)."
	if lb == 0 && ld > 0 {
		return msg + ": the new instance knows only the volumes that existed when it started; it reads the node's state once at start, and the kubelet calls the old instance until the new one is confirmed, so a volume the old instance publishes meanwhile is unknown to the new one. Both instances must read and write the same node state on each call." + fix + " Until then each rollout can leave such volumes mounted (those still there at the end are listed below with their cleanup). See " + ReadinessDoc
	}
	return msg + ": the driver keeps its volumes per instance; both instances must read and write the same node state." + fix + " Until then each rollout leaves such volumes mounted (listed below with their cleanup). See " + ReadinessDoc
}

// awaitLoadRunning waits until want pods of load run; it returns why not
// ("" when they do): a FailedMount event, or the pods' states.
func (s *suite) awaitLoadRunning(ctx context.Context, l *mountLoad, want int) string {
	var why string
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		ev, err := l.Client.CoreV1().Events(l.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			why = err.Error()
			return false, nil
		}
		for _, e := range ev.Items {
			if e.Reason == "FailedMount" {
				why = fmt.Sprintf("the driver did not mount a CSI inline volume without attributes (pod %s: FailedMount: %s)", e.InvolvedObject.Name, e.Message)
				return true, nil
			}
		}
		pl, err := l.Client.CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			why = err.Error()
			return false, nil
		}
		running := 0
		var states []string
		for i := range pl.Items {
			if pl.Items[i].Status.Phase == corev1.PodRunning {
				running++
			} else {
				states = append(states, pl.Items[i].Name+": "+waitingReasons(&pl.Items[i]))
			}
		}
		why = fmt.Sprintf("%d of %d pods with a CSI inline volume run within %s (%s)", running, want, podWait, strings.Join(states, "; "))
		if running == want {
			why = ""
		}
		return running == want, nil
	})
	return why
}

// askInstance asks one instance of the driver (its socket on node) what it
// tells the kubelet; an error when this run cannot dial the node's sockets.
func (s *suite) askInstance(ctx context.Context, node, sock string) (DriverInfo, error) {
	if s.cl.Dialer == nil {
		return DriverInfo{}, fmt.Errorf("the node's sockets cannot be dialed from here (verify --local-node-sockets on the node itself)")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return AskDriver(cctx, s.cl.Dialer, node, sock)
}

// infoDiffers says how two NodeGetInfo answers differ ("" when they agree).
func infoDiffers(a, b DriverInfo) string {
	var d []string
	if a.Name != b.Name {
		d = append(d, fmt.Sprintf("GetPluginInfo name %q, then %q", a.Name, b.Name))
	}
	if a.Node.GetNodeId() != b.Node.GetNodeId() {
		d = append(d, fmt.Sprintf("node ID %q, then %q", a.Node.GetNodeId(), b.Node.GetNodeId()))
	}
	if a.Node.GetMaxVolumesPerNode() != b.Node.GetMaxVolumesPerNode() {
		d = append(d, fmt.Sprintf("max volumes %d, then %d", a.Node.GetMaxVolumesPerNode(), b.Node.GetMaxVolumesPerNode()))
	}
	if ta, tb := fmt.Sprint(a.Node.GetAccessibleTopology().GetSegments()), fmt.Sprint(b.Node.GetAccessibleTopology().GetSegments()); ta != tb {
		d = append(d, fmt.Sprintf("topology %s, then %s", ta, tb))
	}
	return strings.Join(d, "; ")
}

// readinessChosen reports whether a readiness case runs: chosen, or, when
// no case is chosen, with manifests that turn the mode on.
func (s *suite) readinessChosen(name string) bool {
	if len(s.opt.Cases) == 0 {
		return s.d.rolling()
	}
	return slices.Contains(s.opt.Cases, name)
}
