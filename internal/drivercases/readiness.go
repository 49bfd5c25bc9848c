package drivercases

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	return []string{CaseModeManifests, CaseVolumesAcross, CaseOwnSocket, CaseServesAfterTerm}
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
)

// notJudged ends the case with VerdictNotJudged and why (what verify would
// need): never pass.
func (c *check) notJudged(format string, args ...any) {
	c.verdict = VerdictNotJudged
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
// (published by the instance registered now), the workload rolls until the
// old pod is gone (the kubelet's endpoint is the new instance's), the pods
// are deleted and the kubelet must tear their volumes down through the new
// instance. NodeGetInfo must agree on both instances. It records the
// driver's socket directory meanwhile for R3.
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
	var uids []string
	for i := range acrossVolumes {
		p, err := pods.Create(ctx, load.pod(fmt.Sprintf("across-%d", i), n), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(p.UID))
	}
	if why := s.awaitLoadRunning(ctx, load, acrossVolumes); why != "" {
		t.notJudged("%s: verify cannot invent the volume attributes or the setup your driver needs for an inline volume. See %s", why, ReadinessDoc)
	}
	old := s.podOn(t, ctx, n)
	oldSock := s.socketFor(old)
	oldInfo, oldErr := s.askInstance(ctx, n, oldSock)
	t.Logf("%d volumes published through the old instance (pod %s, socket %s)", acrossVolumes, old.Name, oldSock)

	before, err := s.cl.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	was := map[types.UID]bool{}
	for _, p := range before {
		was[p.UID] = true
	}
	var samp *socketSampler
	if d.spec.HostSocket != "" && perPod(d.spec.HostSocket) {
		samp = s.sampleSockets(ctx, n, path.Dir(oldSock), old)
	}
	t0 := time.Now()
	if err := s.patchTemplate(ctx, "readiness-"+t0.UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	done, err := s.awaitRolledOut(ctx, was, rolloutWait)
	if err != nil {
		if samp != nil {
			samp.stop()
		}
		t.Fatal(err)
	}
	t.measure("template change -> rolled out (the old pod gone: the kubelet calls the new instance)", done.Sub(t0))
	nw := s.podOn(t, ctx, n)
	newSock := s.socketFor(nw)
	if samp != nil {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second): // the old instance's exit
		}
		s.sockets = &socketRecord{samples: samp.stop(), old: path.Base(oldSock), new: path.Base(newSock), t0: t0}
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
	td, err := s.awaitPodDirsGone(ctx, map[string][]string{n: uids}, shortWait, deleted)
	if err != nil {
		t.Fatal(err)
	}
	if len(td.Left) > 0 {
		t.Errorf("%s", acrossText(td))
		return
	}
	t.Logf("the new instance (pod %s) unpublished the %d volumes the old instance (pod %s) published", nw.Name, acrossVolumes, old.Name)
}

// acrossText is R2's verdict: the driver's answer, its cause and the fix.
func acrossText(td teardown) string {
	codes := map[string]bool{}
	for _, c := range td.Causes {
		codes[c.Code] = true
	}
	answer := "did not tear down"
	if len(codes) == 1 && td.Causes[0].Code != "" {
		answer = "returned " + td.Causes[0].Code + " for"
	}
	msg := fmt.Sprintf("NodeUnpublishVolume on the new instance %s %d of %d volumes the old instance published", answer, len(td.Left), td.Of)
	if c := causesByAnswer(td.Causes); len(c) > 0 {
		msg += " (" + strings.Join(c, "; ") + ")"
	} else {
		msg += fmt.Sprintf(" within %s (the kubelet's log names no NodeUnpublishVolume error for them)", td.Within)
	}
	return msg + ": the driver keeps its volumes per instance; both instances must read and write the same node state. Fix: keep what NodeUnpublishVolume needs on the node (a hostPath directory both pods mount, or the mount table), read it on each call, not once at start; an unpublish of a target that is not mounted succeeds (NodeUnpublishVolume is idempotent). Until then each rollout leaves such volumes mounted (listed below with their cleanup). See " + ReadinessDoc
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

// socketSample is the driver's socket directory on the node at one moment,
// and the old pod then.
type socketSample struct {
	at          time.Time
	present     map[string]bool
	oldDeleting bool // the old pod was deleted (its instance got SIGTERM) or gone
}

// socketRecord is what R2 saw of the socket directory during its rollout,
// for R3.
type socketRecord struct {
	samples  []socketSample
	old, new string // the instances' socket names
	t0       time.Time
}

// socketSampler lists a socket directory on a node every 300 ms, with the
// old pod's state read after each listing; its goroutine ends with stop,
// after the listing in progress (an exec cut off midway logs noise), or
// with the case's context.
type socketSampler struct {
	quit    chan struct{}
	done    chan struct{}
	samples []socketSample
}

func (x *socketSampler) stop() []socketSample {
	close(x.quit)
	<-x.done
	return x.samples
}

func (s *suite) sampleSockets(ctx context.Context, node, dir string, old *corev1.Pod) *socketSampler {
	x := &socketSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(x.done)
		for {
			at := time.Now()
			out, err := s.cl.Node.NodeSh(ctx, node, `find "$1" -mindepth 1 -maxdepth 1 -type s -printf '%f\n'`, dir)
			if err == nil {
				smp := socketSample{at: at, present: map[string]bool{}}
				for _, f := range strings.Fields(out) {
					smp.present[f] = true
				}
				p, gerr := s.cl.Client.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
				smp.oldDeleting = apierrors.IsNotFound(gerr) || gerr == nil && (p.UID != old.UID || p.DeletionTimestamp != nil)
				if gerr == nil || apierrors.IsNotFound(gerr) { // else the pod's state is unknown: no sample
					x.samples = append(x.samples, smp)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-x.quit:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	return x
}

// judgeSockets says what R2's samples show against "each instance serves
// and removes only its own CSI socket".
func judgeSockets(r *socketRecord) []string {
	var out []string
	newSeen := false
	for _, smp := range r.samples {
		newSeen = newSeen || smp.present[r.new]
		if !smp.present[r.old] && !smp.oldDeleting {
			who := "something other than the old instance"
			if newSeen {
				who = "the new instance (its socket " + r.new + " was there)"
			}
			out = append(out, fmt.Sprintf("the old instance's socket %s disappeared at +%.1f s while its pod was still running and not deleted: %s removed a socket that is not its own, and the kubelet's calls to the old instance fail meanwhile. Fix: remove only your own socket (the path of your --endpoint), never the directory's other files. See %s",
				r.old, smp.at.Sub(r.t0).Seconds(), who, ReadinessDoc))
			break
		}
	}
	if len(r.samples) == 0 {
		return append(out, "no listing of the socket directory succeeded during the rollout")
	}
	last := r.samples[len(r.samples)-1]
	if !last.present[r.new] {
		out = append(out, fmt.Sprintf("the new instance's socket %s is not there after the rollout (present: %s). See %s", r.new, presentList(last), ReadinessDoc))
	}
	if last.oldDeleting && last.present[r.old] {
		out = append(out, fmt.Sprintf("the old instance's socket %s is still there after its pod is gone: an instance must remove its own socket when it stops (sockets named by pod pile up in the directory). See %s", r.old, ReadinessDoc))
	}
	return out
}

func presentList(s socketSample) string {
	var l []string
	for k := range s.present {
		l = append(l, k)
	}
	sort.Strings(l)
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// R3. Each instance serves and removes only its own CSI socket: from R2's
// rollout, the old instance's socket stays while the old pod runs (the new
// instance did not remove it), the new one's is there at the end, the old
// one's is gone once its pod is.
func (s *suite) ownSocket(t *check) {
	if s.blockRoll != "" {
		t.Skipf("R1: %s", s.blockRoll)
	}
	d := s.d
	switch {
	case d.spec.HostSocket == "":
		t.notJudged("the registrar's --csi-address is not on a hostPath volume: verify cannot find the driver's socket directory on the node. See %s", ReadinessDoc)
	case !perPod(d.spec.HostSocket):
		t.Errorf("the driver's CSI socket %s is one path for every pod: the new instance replaces the old one's socket while the old instance serves. Fix: a socket per pod (/csi/$(POD_UID).sock). See %s", d.spec.HostSocket, ReadinessDoc)
		return
	case !surges(d.spec.Workload):
		t.notJudged("%s does not surge: two instances never run side by side on a node, so whose socket is whose cannot be seen. See %s", d.spec.Workload, ReadinessDoc)
	case s.sockets == nil:
		t.notJudged("%s did not roll the workload (its verdict says why); R3 reads its rollout", CaseVolumesAcross)
	}
	r := s.sockets
	t.Logf("%d listings of %s during the rollout; old socket %s, new socket %s", len(r.samples), path.Dir(d.spec.HostSocket), r.old, r.new)
	for _, p := range judgeSockets(r) {
		s.socketThief = s.socketThief || strings.Contains(p, "not its own")
		t.Errorf("%s", p)
	}
}

// R4. The driver keeps serving a few seconds after SIGTERM: the pod is
// deleted (the kubelet sends SIGTERM at once) and its instance's socket is
// asked every 250 ms until it stops answering; the kubelet may still call
// it while the next instance takes over.
func (s *suite) servesAfterTerm(t *check) {
	ctx, n, _ := s.begin(t)
	if s.blockRoll != "" {
		t.Skipf("R1: %s", s.blockRoll)
	}
	pod := s.podOn(t, ctx, n)
	sock := s.socketFor(pod)
	serving, how := s.servingProbe(ctx, pod, sock)
	if ok, why, own := serving(ctx); !ok {
		if own != nil {
			t.Fatal(own)
		}
		t.notJudged("the driver's socket %s does not answer before the delete (%s), so whether it serves after SIGTERM cannot be told. See %s", sock, why, ReadinessDoc)
	}
	before, err := s.cl.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	was := map[types.UID]bool{}
	for _, p := range before {
		was[p.UID] = true
	}
	t0 := time.Now()
	if err := s.cl.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	var why string
	var owns []string
	for time.Since(t0) < serveWatch {
		ok, w, own := serving(ctx)
		if own != nil {
			owns = append(owns, own.Error()) // no answer either way: ask again
		} else if !ok {
			why = w
			break
		} else {
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	served := last.Sub(t0)
	if last.IsZero() {
		served = 0
	}
	if len(owns) > 0 {
		t.Logf("%d of verify's own asks got no answer (tried again): %s", len(owns), owns[len(owns)-1])
	}
	t.measure("pod delete (SIGTERM) -> the driver's socket answers no more ("+how+")", served)
	if why != "" && served < minServeAfterTerm && s.socketThief && s.socketGone(ctx, pod.Spec.NodeName, sock) {
		t.notJudged("the driver's socket %s was removed %.1f s after SIGTERM, and R3 saw the new instance remove the old one's socket: whether this instance serves after SIGTERM cannot be told. Fix R3 first. See %s", path.Base(sock), served.Seconds(), ReadinessDoc)
	} else if why != "" && served < minServeAfterTerm {
		t.Errorf("the driver stopped serving %.1f s after SIGTERM (its socket %s: %s): the kubelet may still call this instance while the next one takes over (a registration in progress, calls in flight), and those calls fail. Fix: on SIGTERM keep serving a few seconds (the reference driver: --shutdown-delay=5s), within terminationGracePeriodSeconds. See %s",
			served.Seconds(), path.Base(sock), why, ReadinessDoc)
	} else {
		t.Logf("the driver served %.1f s after SIGTERM", served.Seconds())
	}
	if _, err := s.awaitRolledOut(ctx, was, rolloutWait); err != nil {
		t.Fatal(err)
	}
}

// socketGone reports whether the socket file is gone on node.
func (s *suite) socketGone(ctx context.Context, node, sock string) bool {
	out, err := s.cl.Node.NodeSh(ctx, node, `[ -e "$1" ] && echo present || echo gone`, sock)
	return err == nil && strings.TrimSpace(out) == "gone"
}

// PodExec runs argv in a container of a pod (the API's exec): R4 asks the
// driver from the registrar's container, on the node, where verify cannot
// dial the node's sockets. verify's node pods implement it.
type PodExec interface {
	ExecIn(ctx context.Context, namespace, pod, container string, argv ...string) (string, error)
}

// servingProbe returns how R4 asks whether the instance serves (ok), or
// that verify's own means failed this time (own: not an answer): GetPluginInfo
// and NodeGetInfo on its socket where the node's sockets can be dialed;
// else csi-registrar's probe (the CSI Probe call) run in a registrar
// container of the workload on the node, which mounts the socket directory;
// else whether a process of the pod listens on the socket (sockowner).
func (s *suite) servingProbe(ctx context.Context, pod *corev1.Pod, sock string) (func(context.Context) (ok bool, why string, own error), string) {
	if s.cl.Dialer != nil {
		return func(ctx context.Context) (bool, string, error) {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := AskDriver(cctx, s.cl.Dialer, pod.Spec.NodeName, sock); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		}, "GetPluginInfo and NodeGetInfo"
	}
	if ex, ok := s.cl.Node.(PodExec); ok && s.d.spec.Registrar != "" {
		inContainer := driverspec.ExpandForPod(s.d.spec.CSIAddress, pod, s.d.spec.Registrar)
		probe := func(ctx context.Context) (bool, string, error) {
			from, err := s.registrarOn(ctx, pod.Spec.NodeName)
			if err != nil {
				return false, "", err
			}
			out, err := ex.ExecIn(ctx, from.Namespace, from.Name, s.d.spec.Registrar, "/csi-registrar", "probe", "--csi-address="+inContainer, "--timeout=1s")
			switch {
			case VerifysOwn(err):
				return false, "", err
			case err != nil:
				return false, strings.TrimSpace(out + " " + err.Error()), nil
			}
			return true, "", nil
		}
		if ok, _, err := probe(ctx); ok && err == nil {
			return probe, "csi-registrar probe (CSI Probe) in a registrar container on the node"
		}
	}
	return func(ctx context.Context) (bool, string, error) {
		p, err := s.cl.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if _, err := SocketOwner(ctx, s.cl.Node, p, sock); err != nil {
			if VerifysOwn(err) {
				return false, "", err
			}
			return false, err.Error(), nil
		}
		return true, "", nil
	}, "a process of the pod listens on it"
}

// registrarOn returns a pod of the workload on node whose registrar
// container runs, one not being deleted first.
func (s *suite) registrarOn(ctx context.Context, node string) (*corev1.Pod, error) {
	l, err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.cl.Selector})
	if err != nil {
		return nil, err
	}
	var pick *corev1.Pod
	for i := range l.Items {
		p := &l.Items[i]
		if p.Spec.NodeName != node || ContainerStatus(p, s.d.spec.Registrar).State.Running == nil {
			continue
		}
		if pick == nil || pick.DeletionTimestamp != nil && p.DeletionTimestamp == nil {
			pick = p
		}
	}
	if pick == nil {
		return nil, &VerifyError{Err: fmt.Errorf("no pod of %s on %s with its registrar container running, to ask the driver from", s.cl.Workload, node)}
	}
	return pick, nil
}

// readinessChosen reports whether a readiness case runs: chosen, or, when
// no case is chosen, with manifests that turn the mode on.
func (s *suite) readinessChosen(name string) bool {
	if len(s.opt.Cases) == 0 {
		return s.d.rolling()
	}
	return slices.Contains(s.opt.Cases, name)
}
