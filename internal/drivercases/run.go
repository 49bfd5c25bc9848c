package drivercases

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The case names, in the order they run.
const (
	CaseDeployed       = "1_deployed"
	CasePodDeleted     = "2_registrar_pod_deleted"
	CaseKubeletRestart = "3_kubelet_restarted"
	CaseSocketRemoved  = "4_registration_socket_removed"
	CaseDriverKilled   = "5_driver_container_killed"
	CaseRollout        = "6_rollout"
	CaseUninstalled    = "7_uninstalled"
	// CaseRolloutsWithFaults runs only when chosen (Options.Cases): a series
	// of rollouts with a fault of cases 2-5 in each.
	CaseRolloutsWithFaults = "8_rollouts_with_faults"
)

// Cases returns the names of the cases that Options.Cases may choose:
// 2-6, 8 which runs only when chosen, and the mode-readiness cases R1-R5
// (ReadinessCases), which run unchosen on manifests with the mode. Case 1 (the installation) and
// case 7 (the uninstallation) always run.
func Cases() []string {
	return append([]string{CasePodDeleted, CaseKubeletRestart, CaseSocketRemoved, CaseDriverKilled, CaseRollout, CaseRolloutsWithFaults}, ReadinessCases()...)
}

// CheckCases returns a *csiplugin.ValidationError naming the first name
// that is not one of Cases, with the names it may be.
func CheckCases(names []string) error {
	for _, n := range names {
		if !slices.Contains(Cases(), n) {
			return &csiplugin.ValidationError{What: "case", Value: n, Rule: "is not a case that can be chosen",
				Fix: "choose one of " + strings.Join(Cases(), ", ") + " (1_deployed and 7_uninstalled always run; R1-R5 run unchosen when the manifests turn on the rolling-update mode)"}
		}
	}
	return nil
}

// chosen reports whether the case runs: every case 2-6 when none is chosen,
// case 8 only when chosen.
func (s *suite) chosen(name string) bool {
	if slices.Contains(ReadinessCases(), name) {
		return s.readinessChosen(name)
	}
	if len(s.opt.Cases) == 0 {
		return name != CaseRolloutsWithFaults
	}
	return slices.Contains(s.opt.Cases, name)
}

// cases runs the seven cases in order on one deployment. Cases 2-6 need case
// 1's registration; case 7 uninstalls.
func (s *suite) cases(ctx context.Context) {
	deployed := s.runCase(ctx, CaseDeployed, "", s.deployed)
	for _, c := range []struct {
		name, restarts string // restarts: the container the case's fault restarts
		f              func(*check)
	}{
		{CaseModeManifests, "", s.modeManifests},
		{CasePodDeleted, "", s.podDeleted},
		{CaseKubeletRestart, "", s.kubeletRestarted},
		{CaseSocketRemoved, "", s.socketRemoved},
		{CaseDriverKilled, s.d.driver, s.driverKilled},
		{CaseRollout, "", s.rollout},
		{CaseVolumesAcross, "", s.volumesAcross},
		{CaseOwnSocket, "", s.ownSocket},
		{CaseServesAfterTerm, "", s.servesAfterTerm},
		{CaseNewerDriverFails, s.d.driver, s.newerDriverFails},
		{CaseRolloutsWithFaults, "", s.rolloutsWithFaults},
	} {
		if !s.chosen(c.name) {
			continue
		}
		s.runCase(ctx, c.name, c.restarts, func(t *check) {
			if !deployed {
				t.Skipf("case 1 failed: the driver is not registered")
			}
			c.f(t)
		})
	}
	s.runCase(ctx, CaseUninstalled, "", s.uninstalled)
}

// runCase runs one case and records its result; it reports whether the
// case passed. expected is the container the case itself restarts (its
// fault), if any.
func (s *suite) runCase(ctx context.Context, name, expected string, f func(*check)) bool {
	fmt.Fprintf(s.opt.Out, "=== case %s\n", name)
	start := time.Now()
	t := &check{name: name, out: s.opt.Out, parent: ctx}
	before := s.workloadRestarts(ctx)
	t.run(f)
	s.leftAfter(ctx, t)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	r := report.CaseResult{Case: name, Verdict: "pass", Restarts: map[string]int32{}, Times: t.times, Rollout: t.rollout, Mounts: t.mounts, Findings: t.findings}
	switch {
	case t.skipped:
		r.Verdict = "skip"
	case t.failed:
		r.Verdict = "FAIL"
	case len(t.notChecked) > 0:
		r.Verdict = report.VerdictNotChecked
	case t.verdict != "":
		r.Verdict = t.verdict
	}
	var through []string
	for c, n := range s.workloadRestarts(rctx) {
		if d := n - before[c]; d > 0 {
			r.Restarts[c] = d
			if c != expected {
				through = append(through, fmt.Sprintf("%s (%d)", c, d))
			}
		}
	}
	sort.Strings(through)
	notes := t.notes
	if len(t.notChecked) > 0 {
		notes = append(notes, "verify could not check (its own error): "+strings.Join(lastN(t.notChecked, 2), "; "))
	}
	if s.notRegisteredAtStart[name] {
		notes = append(notes, "not registered at the start of the case (as an earlier case left it)")
	}
	if len(through) > 0 && r.Verdict == "pass" {
		n := "recovered only through a container restart: " + strings.Join(through, ", ")
		t.Logf("%s", n)
		notes = append(notes, n)
	}
	r.Note = strings.Join(notes, "; ")
	s.result.Cases = append(s.result.Cases, r)
	fmt.Fprintf(s.opt.Out, "--- %s: %s (%.2fs)\n", strings.ToUpper(r.Verdict), name, time.Since(start).Seconds())
	return r.Verdict == "pass" || r.Verdict == report.VerdictMeasured || r.Verdict == report.VerdictNotJudged
}

// leftAfter lists what the driver left on the nodes after case t (volumes
// of pods that are gone), once each: the case fails with it, the summary
// lists it with its cleanup.
func (s *suite) leftAfter(ctx context.Context, t *check) {
	if s.d == nil || s.d.name == "" {
		return
	}
	nodes := s.allNodes
	if len(s.opt.Nodes) > 0 {
		nodes = s.opt.Nodes
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*leftoverGrace)
	defer cancel()
	left, err := s.findLeftovers(lctx, nodes, s.seenLeft, s.waitedTeardown)
	if err != nil {
		t.couldNotCheck("what the driver left on the nodes: %v", err)
		return
	}
	var fresh []string
	for _, l := range left {
		if s.seenLeft[l.Dir] {
			continue
		}
		s.seenLeft[l.Dir] = true
		l.Case = t.name
		s.result.Left = append(s.result.Left, l)
		fresh = append(fresh, l.String())
	}
	if len(fresh) > 0 {
		t.addNote(fmt.Sprintf("left on the node: %d volume(s) (cleanup below the table)", len(fresh)))
		t.Errorf("left on the node: %d volume(s) of the driver whose pods are gone (the summary lists the cleanup):\n%s", len(fresh), strings.Join(fresh, "\n"))
	}
}

// workloadRestarts sums the restartCount of each container name over the
// workload's pods.
func (s *suite) workloadRestarts(ctx context.Context) map[string]int32 {
	m := map[string]int32{}
	pods, err := s.cl.Pods(ctx)
	if err != nil {
		return m
	}
	for _, p := range pods {
		for c, st := range podContainers(p) {
			m[c] += st.RestartCount
		}
	}
	return m
}

// context gives a case its context and dumps diagnostics if it fails.
func (s *suite) context(t *check) context.Context {
	ctx, cancel := context.WithTimeout(t.parent, 8*time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.failed {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(t.parent), time.Minute)
			defer dcancel()
			t.Logf("diagnostics:\n%s", s.cl.Diagnostics(dctx, s.d.nodes))
		}
	})
	return ctx
}

// begin starts cases 2-6: the driver registered as its NodeGetInfo says on
// every node, every pod Ready. It returns the node the case acts on and
// what the kubelet must write there.
func (s *suite) begin(t *check) (context.Context, string, nodeExpect) {
	ctx := s.context(t)
	d := s.d
	var e nodeExpect
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		last = nil
		if err := s.updateNodes(ctx, d); err != nil {
			return false, err
		}
		if len(d.nodes) == 0 {
			last = append(last, "no pod of "+d.spec.Workload.String()+" runs on a node")
			return false, nil
		}
		for _, n := range s.allNodes {
			if slices.Contains(d.nodes, n) {
				continue
			}
			// No pod here: the driver must not be registered here.
			r, err := s.cl.Registered(ctx, n, d.name)
			if err != nil {
				return false, err
			}
			if !r.Absent() {
				last = append(last, fmt.Sprintf("node %s runs no pod of %s, yet the driver is registered there (annotation %v, %d CSINode entries)", n, d.spec.Workload, r.Annotated, len(r.Entries)))
			}
		}
		for _, n := range d.nodes {
			x, err := s.expect(ctx, n)
			if err != nil {
				last = append(last, err.Error())
				continue
			}
			r, err := s.cl.Registered(ctx, n, d.name)
			if err != nil {
				return false, err
			}
			last = append(last, d.problems(r, n, x)...)
			if pod, err := s.cl.PodOn(ctx, n); err != nil || !PodReady(pod) {
				last = append(last, fmt.Sprintf("no Ready pod on %s (%v)", n, err))
			}
			if n == d.nodes[0] {
				e = x
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		s.notRegisteredAtStart[t.name] = true
		t.Fatalf("not registered at the start of the case: %s", strings.Join(last, "; "))
	}
	return ctx, d.nodes[0], e
}

// regSocket returns the driver's one registration socket on node; anything
// else of the driver's in plugins_registry fails the case.
func (s *suite) regSocket(t *check, ctx context.Context, node string) NodeFile {
	files, err := s.cl.Node.PluginsRegistry(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	o := s.d.files(files)
	if len(o) != 1 || !s.d.isRegSocket(o[0].Name) || !o[0].Socket {
		want := "the socket " + s.d.regSocket()
		if s.d.rolling() {
			want = "the socket " + s.d.regSocket() + " (the handover) or one announcement socket " + s.d.regSocketText() + "<instance>_<version>-reg.sock (the rolling-update mode)"
		}
		t.Fatalf("%s on %s: files of the driver %q, want exactly %s", PluginsRegistry, node, names(o), want)
	}
	return o[0]
}

// expectSoon waits until the driver on node answers NodeGetInfo (a
// container that just started may not serve its socket yet).
func (s *suite) expectSoon(t *check, ctx context.Context, node string) nodeExpect {
	var e nodeExpect
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, shortWait, true, func(ctx context.Context) (bool, error) {
		e, last = s.expect(ctx, node)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the driver on %s does not answer within %s: %v", node, shortWait, last)
	}
	return e
}

// samePod fails the case unless pod before is still there (not replaced),
// and returns it as it is now.
func (s *suite) samePod(t *check, ctx context.Context, before *corev1.Pod) *corev1.Pod {
	now, err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != before.UID {
		t.Fatalf("pod %s was replaced", before.Name)
	}
	return now
}

// podUIDs returns the UIDs of the workload's pods now: the set a rollout
// started next replaces (awaitRolledOut, awaitReplaced).
func (s *suite) podUIDs(ctx context.Context) (map[types.UID]bool, error) {
	pods, err := s.cl.Pods(ctx)
	if err != nil {
		return nil, err
	}
	uids := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		uids[p.UID] = true
	}
	return uids, nil
}

func (s *suite) podOn(t *check, ctx context.Context, node string) *corev1.Pod {
	p, err := s.cl.PodOn(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *suite) recordNode(t *check, ctx context.Context, node string) (n, cn *record.Recorder) {
	n, err := RecordNode(ctx, s.cl.Client, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	cn, err = RecordCSINode(ctx, s.cl.Client, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cn.Stop)
	return n, cn
}

func (s *suite) recordPods(t *check, ctx context.Context) *record.Recorder {
	r, err := s.cl.RecordPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// registryListing is plugins_registry on a node as listed at an event.
type registryListing struct {
	at    time.Time
	files []NodeFile
	err   error
}

// registryAtExit lists plugins_registry on node as soon as podRec records
// that container of the pod with uid terminated (or the pod is gone or
// terminal), and sends the listing. The goroutine ends with ctx at the
// latest (the case's context).
func (s *suite) registryAtExit(ctx context.Context, podRec *record.Recorder, node string, uid types.UID, container string) <-chan registryListing {
	atExit := make(chan registryListing, 1)
	go func() {
		_, ev, err := podRec.Await(ctx, 0, podWait, "old registrar exited", func(st record.State) bool {
			p := st.Pod(string(uid))
			return p == nil || ContainerStatus(p, container).State.Terminated != nil ||
				p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		})
		if err != nil {
			atExit <- registryListing{err: err}
			return
		}
		files, err := s.cl.Node.PluginsRegistry(ctx, node)
		atExit <- registryListing{at: ev.At, files: files, err: err}
	}()
	return atExit
}

// kubeletAttempts counts the kubelet's registration attempts of the driver
// on node since t (its log), and returns the kubelet's log lines about the
// driver or plugin registration errors since then, for a diagnosis.
func (s *suite) kubeletAttempts(ctx context.Context, node string, since time.Time) (int, []string, error) {
	log, err := s.cl.Node.KubeletLog(ctx, node, 5000)
	if err != nil {
		return 0, nil, err
	}
	n, related := kubeletlog.Attempts(log, s.d.name, since)
	return n, related, nil
}

// waitKubeletAttempt waits until the kubelet on node logged a new attempt
// to register the driver since t0 and returns when it was seen.
func (s *suite) waitKubeletAttempt(t *check, ctx context.Context, node string, t0 time.Time, timeout time.Duration) time.Duration {
	var last error
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, _, err := s.kubeletAttempts(ctx, node, t0)
		if err == nil && n > 0 {
			return time.Since(t0)
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Fatalf("the kubelet on %s logged no new attempt to register %s (%q) within %s (%v)", node, s.d.name, kubeletlog.RegisterLine(s.d.name), timeout, last)
	return 0
}

// Conditions on recorded states.

// AnnotatedWith: the Node's csi.volume.kubernetes.io/nodeid annotation has
// driver (with a node ID idOK accepts) when want, and has not when !want.
func AnnotatedWith(node, driver string, want bool, idOK func(string) bool) func(record.State) bool {
	return func(st record.State) bool {
		n := st.Node(node)
		if n == nil {
			return false
		}
		m, err := AnnotationMap(n)
		if err != nil {
			return false
		}
		v, ok := m[driver]
		if !want {
			return !ok
		}
		return ok && idOK(v)
	}
}

func podIsReady(uid types.UID, want bool) func(record.State) bool {
	return func(st record.State) bool {
		p := st.Pod(string(uid))
		return p != nil && PodReady(p) == want
	}
}

// settled waits until the latest recorded state satisfies cond: the state
// now, not one seen earlier.
func settled(t *check, ctx context.Context, r *record.Recorder, timeout time.Duration, what string, cond func(record.State) bool) record.Event {
	_, ev := await(t, ctx, r, r.Len()-1, timeout, what, cond)
	return ev
}

func await(t *check, ctx context.Context, r *record.Recorder, from int, timeout time.Duration, what string, cond func(record.State) bool) (int, record.Event) {
	i, ev, err := r.Await(ctx, from, timeout, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return i, ev
}

// Pick returns the entries of m whose keys are in keys (a node's topology
// labels, for a log line).
func Pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
