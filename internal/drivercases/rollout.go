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
	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The rollout case's settings.
const (
	// RolloutAnnotation is the pod template annotation the rollout case
	// sets: each value is a rollout.
	RolloutAnnotation = "csi-registrar.io/verify-rollout"
	// mountEvery is how often an inline-volume pod is started (round robin
	// over the nodes under test) during the rollout.
	mountEvery = 300 * time.Millisecond
	// afterRollout is how long pods keep starting once the rollout is done:
	// an observation window of three kubelet rounds, in which no mount may
	// fail (the FailedMount events counted below).
	afterRollout = 3 * kubeletplugins.ReconcilerPeriod
	rolloutWait  = 5 * time.Minute
)

// 6. Rollout: the node plugin workload is rolled (its pod template gets a
// new annotation, as any image or config change does) as its manifests say
// (the update strategy as written). Per node it reports how long the driver
// was unregistered (its CSINode entry or its Node annotation key absent, as
// the API server told every change) and, when the driver serves CSI inline
// volumes (its CSIDriver lists Ephemeral), how many mounts of pods started
// every 0.3 s during the rollout and a few seconds after failed. It judges
// only manifests that turn on csi-registrar's rolling-update mode: pass is no
// unregistered moment and no failed mount; otherwise the verdict is
// "measured".
func (s *suite) rollout(t *check) {
	ctx, _, _ := s.begin(t)
	d := s.d
	w := d.spec.Workload
	t.addNote("rollout: " + w.Rollout())
	if w.OnDelete() {
		t.Skipf("%s has updateStrategy OnDelete: a template change rolls out nothing", w)
	}
	if s.blockRoll != "" {
		t.Skipf("R1: %s", s.blockRoll)
	}
	nodes := slices.Clone(d.nodes)
	mode := d.spec.RollingUpdate
	t.Logf("%s: %s; rolling-update mode: %s", w, w.Rollout(), orDash(mode))
	type recs struct{ node, cn *record.Recorder }
	r := map[string]recs{}
	for _, n := range nodes {
		a, b := s.recordNode(t, ctx, n)
		r[n] = recs{a, b}
	}
	before, err := s.podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var load *mountLoad
	if why := s.inlineVolumes(ctx); why != "" {
		t.addNote("mounts not measured: " + why)
		t.Logf("mounts not measured: %s; the registration only", why)
	} else {
		load = s.newMountLoad(t, ctx, nodes)
		if why := load.baseline(ctx); why != "" {
			t.addNote("mounts not measured: " + why)
			t.Logf("mounts not measured: %s; the registration only", why)
			load = nil
		}
	}
	t.mounts = load != nil

	t0 := time.Now()
	if load != nil {
		load.Start(ctx)
	}
	if err := s.patchTemplate(ctx, t0.UTC().Format(time.RFC3339Nano)); err != nil {
		if load != nil {
			_ = load.Stop() // the case ends on err
		}
		t.Fatal(err)
	}
	done, err := s.awaitRolledOut(ctx, before, rolloutWait)
	if err != nil {
		if load != nil {
			_ = load.Stop() // the case ends on err
		}
		t.Fatal(err)
	}
	t.measure("template change -> rolled out (every pod new and Ready)", done.Sub(t0))
	select {
	case <-ctx.Done():
	case <-time.After(afterRollout):
	}
	if load != nil {
		_ = load.Stop() // finish reports its error
	}
	if err := s.updateNodes(ctx, d); err != nil {
		t.Fatal(err)
	}
	// A node whose pod stayed must be registered again; wait for it (a gap
	// that has not ended is measured up to then).
	for _, n := range nodes {
		if !slices.Contains(d.nodes, n) {
			continue
		}
		_, _ = awaitRegistered(ctx, n, d.name, r[n].node, r[n].cn, shortWait)
	}
	end := time.Now()

	results := map[string]*report.NodeRollout{}
	for _, n := range nodes {
		nr := &report.NodeRollout{Node: n, Moved: !slices.Contains(d.nodes, n)}
		for _, rec := range []*record.Recorder{r[n].node, r[n].cn} {
			if err := rec.Err(); err != nil {
				nr.WatchBroke = err.Error()
			}
		}
		cnGaps, anGaps, all := registrationAbsences(n, d.name, r[n].node, r[n].cn, t0, end)
		nr.Gaps, nr.Unregistered = len(all), TotalOf(all).Seconds()
		nr.NotBack = len(all) > 0 && all[len(all)-1].Open
		t.Logf("node %s: CSINode entry absent: %s; annotation key absent: %s; unregistered %.3f s", n, spansText(cnGaps), spansText(anGaps), nr.Unregistered)
		if nr.Moved {
			t.Logf("node %s: the workload's pod left it (now on %v): its registration there ended, as expected", n, d.nodes)
			t.addNote(fmt.Sprintf("the pod left %s for %v", n, d.nodes))
		}
		if dereg := s.deregistrations(ctx, n, t0); len(dereg) > 0 {
			t.Logf("node %s: the kubelet's log since the rollout: %s", n, strings.Join(lastN(dereg, 6), " | "))
		}
		results[n] = nr
	}
	if load != nil {
		for n, c := range load.finish(t, ctx) {
			if nr := results[n]; nr != nil {
				nr.Started, nr.FailedMounts, nr.NeverRan = c.started, c.failed, c.neverRan
			}
		}
	}
	j := rolloutJudgement{Mode: mode, Workload: w.Kind, MaxSurge: w.MaxSurge, Mounts: load != nil}
	for _, n := range nodes {
		nr := results[n]
		j.Nodes = append(j.Nodes, *nr)
		if load != nil {
			t.Logf("node %s: %d inline-volume pods started, %d FailedMount events, %d never ran", n, nr.Started, nr.FailedMounts, nr.NeverRan)
		}
	}
	t.rollout = j.Nodes
	v, why := j.verdict()
	switch v {
	case "pass":
	case report.VerdictMeasured:
		t.verdict = report.VerdictMeasured
		t.addNote(strings.Join(why, "; "))
	default:
		for _, y := range why {
			t.Errorf("%s", y)
		}
	}
}

// inlineVolumes says why the driver's CSI inline volumes cannot be mounted
// ("" when they can): the cluster's CSIDriver object of the driver must
// list the Ephemeral lifecycle mode.
func (s *suite) inlineVolumes(ctx context.Context) string {
	cd, err := s.cl.Client.StorageV1().CSIDrivers().Get(ctx, s.d.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "no CSIDriver object " + s.d.name + " (CSI inline volumes need one with volumeLifecycleModes Ephemeral)"
	case err != nil:
		return err.Error()
	case !slices.Contains(cd.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral):
		return fmt.Sprintf("the CSIDriver %s has volumeLifecycleModes %v, without Ephemeral: no CSI inline volume", s.d.name, cd.Spec.VolumeLifecycleModes)
	case s.opt.WorkloadImage == "":
		return "no image for the inline-volume pods (Options.WorkloadImage)"
	}
	return ""
}

// patchTemplate sets RolloutAnnotation on the workload's pod template.
func (s *suite) patchTemplate(ctx context.Context, value string) error {
	w := s.d.spec.Workload
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RolloutAnnotation, value)
	var err error
	apps := s.cl.Client.AppsV1()
	switch w.Kind {
	case "DaemonSet":
		_, err = apps.DaemonSets(s.cl.Namespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	case "StatefulSet":
		_, err = apps.StatefulSets(s.cl.Namespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	case "Deployment":
		_, err = apps.Deployments(s.cl.Namespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	default:
		err = fmt.Errorf("%s: cannot roll a %s", w, w.Kind)
	}
	if err != nil {
		return fmt.Errorf("roll %s (annotation %s on its pod template): %w", w, RolloutAnnotation, err)
	}
	return nil
}

// awaitRolledOut waits until no pod of before is left, each pod of the
// workload is Ready, and as many run as before (a DaemonSet: one a node it
// wants), and a DaemonSet is rolled out by the one rule
// (DaemonSetRolloutProblems: every pod of its current revision); it
// returns when it saw that.
func (s *suite) awaitRolledOut(ctx context.Context, before map[types.UID]bool, timeout time.Duration) (time.Time, error) {
	start := time.Now()
	at, err := s.awaitReplaced(ctx, before, len(before), timeout)
	w := s.d.spec.Workload
	if err != nil || w.Kind != "DaemonSet" {
		return at, err
	}
	var last []string
	first := true
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, max(timeout-time.Since(start), time.Second), true, func(ctx context.Context) (bool, error) {
		p, _, err := DaemonSetRollout(ctx, s.cl.Client, s.cl.Namespace, w.Name, s.cl.Selector)
		if err != nil {
			p = []string{err.Error()}
		}
		last = p
		if len(p) > 0 {
			first = false
			return false, nil
		}
		if !first {
			at = time.Now()
		}
		return true, nil
	})
	if err != nil {
		return at, fmt.Errorf("%s not rolled out within %s: %w: %s", w, timeout, err, strings.Join(last, "; "))
	}
	return at, nil
}

// awaitReplaced waits until none of the pods gone is left and want pods of
// the workload, none of them deleting, are Ready: a rollout (gone: every pod
// before it), or one pod deleted on a node of several (gone: that pod alone).
func (s *suite) awaitReplaced(ctx context.Context, gone map[types.UID]bool, want int, timeout time.Duration) (time.Time, error) {
	before := gone
	var last string
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.cl.Selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for i := range l.Items {
			p := &l.Items[i]
			if before[p.UID] {
				last = fmt.Sprintf("old pod %s on %s still there", p.Name, p.Spec.NodeName)
				return false, nil
			}
			if p.DeletionTimestamp == nil && PodReady(p) {
				ready++
			}
		}
		if ready != want || ready != len(l.Items) {
			last = fmt.Sprintf("%d of %d new pods Ready (%d wanted)", ready, len(l.Items), want)
			return false, nil
		}
		at = time.Now()
		return true, nil
	})
	if err != nil {
		return at, fmt.Errorf("%s not rolled out within %s: %w: %s", s.d.spec.Workload, timeout, err, last)
	}
	return at, nil
}

// deregistrations returns the kubelet's log lines on node since t0 that
// unregister the driver or fail a mount of its volumes.
func (s *suite) deregistrations(ctx context.Context, node string, t0 time.Time) []string {
	log, err := s.cl.Node.KubeletLog(ctx, node, 20000)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(log, "\n") {
		at, ok := kubeletlog.Time(line, t0)
		if !ok || at.Before(t0.Truncate(time.Microsecond)) {
			continue
		}
		if strings.Contains(line, "DeRegisterPlugin request for plugin "+s.d.name) ||
			strings.Contains(line, "MountVolume.SetUp failed") && strings.Contains(line, s.d.name) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// mountLoad is verify's MountLoad: its pods run the workload image and
// tolerate every taint, in a namespace of their own; baseline, awaitTornDown
// and finish are the rollout cases' checks around it.
type mountLoad struct {
	*MountLoad
	s *suite
}

// mountCounts are the figures of one node.
type mountCounts struct{ started, failed, neverRan int }

func (s *suite) newMountLoad(t *check, ctx context.Context, nodes []string) *mountLoad {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "csi-registrar-rollout-"}}
	if s.opt.LabelKey != "" {
		ns.Labels = map[string]string{s.opt.LabelKey: s.opt.LabelValue}
	}
	made, err := s.cl.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := s.cl.Client.CoreV1().Namespaces().Delete(cctx, made.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", made.Name, err)
		}
	})
	l := &mountLoad{s: s}
	l.MountLoad = &MountLoad{Client: s.cl.Client, Namespace: made.Name, Nodes: nodes, Every: mountEvery, Pod: l.pod}
	return l
}

func (l *mountLoad) pod(name, node string) *corev1.Pod {
	no, yes, uid := false, true, int64(65532)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Namespace, Labels: map[string]string{"app": "csi-registrar-rollout-mount"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid},
			Containers: []corev1.Container{{
				Name: "sleep", Image: l.s.opt.WorkloadImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", "3600"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "inline", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "inline", VolumeSource: corev1.VolumeSource{
				CSI: &corev1.CSIVolumeSource{Driver: l.s.d.name},
			}}},
		},
	}
}

// baseline starts one pod on each node before the rollout and waits until
// it runs: a driver that does not mount an inline volume when nothing
// happens says nothing about a rollout. It returns why not ("" when every
// pod ran).
func (l *mountLoad) baseline(ctx context.Context) string {
	pods := l.Client.CoreV1().Pods(l.Namespace)
	for _, n := range l.Nodes {
		if _, err := pods.Create(ctx, l.pod("baseline-"+n, n), metav1.CreateOptions{}); err != nil {
			return fmt.Sprintf("a pod with an inline volume on %s: %v", n, err)
		}
	}
	var why string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		ev, err := l.Client.CoreV1().Events(l.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range ev.Items {
			if e.Reason == "FailedMount" {
				why = fmt.Sprintf("the driver does not mount an inline volume outside a rollout (pod %s: FailedMount: %s)", e.InvolvedObject.Name, e.Message)
				return true, nil
			}
		}
		for _, n := range l.Nodes {
			p, err := pods.Get(ctx, "baseline-"+n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.Phase != corev1.PodRunning {
				why = fmt.Sprintf("pod %s on %s with an inline volume did not run within %s outside a rollout: %s", p.Name, n, podWait, waitingReasons(p))
				return false, nil
			}
		}
		why = ""
		return true, nil
	})
	if err != nil && why == "" {
		why = err.Error()
	}
	// Their events do not count: only the rollout's pods' do (finish).
	if err := l.DeleteAll(context.WithoutCancel(ctx)); err != nil && why == "" {
		return err.Error()
	}
	if why == "" {
		if err := l.AwaitNoPods(ctx, podWait); err != nil {
			return err.Error()
		}
	}
	return why
}

// podDirsScript prints which of the pod UIDs $2... still have a directory
// under the kubelet's pods directory $1: the kubelet removes it once the
// pod's volumes are torn down (unpublished), after the pod object is gone.
const podDirsScript = `d=$1; shift; for u in "$@"; do [ ! -e "$d/$u" ] || echo "$u"; done; true`

// awaitTornDown waits until the kubelet has torn down the volumes of every
// pod started: a pod object is gone before its volumes are unpublished, and
// a driver uninstalled meanwhile (case 7 follows) would leave them mounted,
// with the driver's state behind.
func (l *mountLoad) awaitTornDown(ctx context.Context, timeout time.Duration, since time.Time) (torn teardown, err error) {
	byNode := map[string][]string{}
	for _, p := range l.Pods() {
		if p.UID != "" {
			byNode[p.Node] = append(byNode[p.Node], string(p.UID))
		}
	}
	return l.s.awaitPodDirsGone(ctx, byNode, timeout, since)
}

// teardown is what awaitPodDirsGone saw: the pods whose directories the
// kubelet kept (node/uid), of how many, and why by the kubelet's log.
type teardown struct {
	Left   []string
	Of     int
	Within time.Duration
	Causes []kubeletlog.VolumeError // of the pods left, as the kubelet logged their NodeUnpublishVolume
}

// awaitPodDirsGone waits until the kubelet removed the pod directory of
// every UID of byNode (node -> pod UIDs): it does once the pod's volumes
// are unpublished, after the pod object is gone. Verify's own errors (its
// exec on the node) are tried again within timeout; if no round of the
// check completed, it returns a VerifyError and no finding. The count of
// pods left is the last complete round's.
func (s *suite) awaitPodDirsGone(ctx context.Context, byNode map[string][]string, timeout time.Duration, since time.Time) (teardown, error) {
	td := teardown{Within: timeout}
	for _, uids := range byNode {
		td.Of += len(uids)
		for _, u := range uids {
			if s.waitedTeardown != nil {
				s.waitedTeardown[u] = true
			}
		}
	}
	var own error
	complete := false
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var round []string
		for node, uids := range byNode {
			out, err := s.cl.Node.NodeSh(ctx, node, podDirsScript, append([]string{KubeletRoot + "/pods"}, uids...)...)
			if err != nil {
				own = err
				return false, nil
			}
			for _, u := range strings.Fields(out) {
				round = append(round, node+"/"+u)
			}
		}
		td.Left, complete, own = round, true, nil
		return len(round) == 0, nil
	})
	if !complete {
		if own == nil {
			own = err
		}
		return td, &VerifyError{Err: fmt.Errorf("whether the kubelet tore down the volumes of %d pods (their directories under %s/pods): %w", td.Of, KubeletRoot, own)}
	}
	if len(td.Left) == 0 {
		return td, nil
	}
	sort.Strings(td.Left)
	left := map[string]bool{}
	nodes := map[string]bool{}
	for _, nu := range td.Left {
		n, u, _ := strings.Cut(nu, "/")
		left[u], nodes[n] = true, true
	}
	for n := range nodes {
		log, err := s.cl.Node.KubeletLog(ctx, n, 20000)
		if err != nil {
			continue // the causes are a help; the count stands
		}
		for u, e := range kubeletlog.VolumeErrors(log, kubeletlog.OpTearDown, since) {
			if left[u] {
				td.Causes = append(td.Causes, e)
			}
		}
	}
	sort.Slice(td.Causes, func(i, j int) bool { return td.Causes[i].PodUID < td.Causes[j].PodUID })
	return td, nil
}

// causesByAnswer groups the driver's answers: "NotFound: <desc of one>" ->
// how many volumes got that code (the descriptions name each volume).
func causesByAnswer(causes []kubeletlog.VolumeError) []string {
	type group struct {
		n       int
		example string
	}
	g := map[string]*group{}
	var keys []string
	for _, c := range causes {
		k := c.Code
		if k == "" {
			k = c.Text
		}
		if g[k] == nil {
			g[k] = &group{example: c.Cause()}
			keys = append(keys, k)
		}
		g[k].n++
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d volume(s): %s", g[k].n, g[k].example))
	}
	return out
}

// text is the finding in the driver's terms: how many volumes of how many
// the kubelet could not unpublish and what the driver answered.
func (td teardown) text(through string) string {
	msg := fmt.Sprintf("the kubelet could not tear down %d of %d volumes within %s (NodeUnpublishVolume %s): their pod directories remain under %s/pods: %s",
		len(td.Left), td.Of, td.Within, through, KubeletRoot, strings.Join(lastN(td.Left, 5), ", "))
	if c := causesByAnswer(td.Causes); len(c) > 0 {
		msg += "; the driver answered: " + strings.Join(c, "; ")
	} else {
		msg += "; the kubelet's log names no NodeUnpublishVolume error for them (the driver may not answer at all)"
	}
	return msg
}

// finish waits until every pod started ran (podWait at most), deletes them
// all and waits until they are gone (their volumes unpublished), then counts
// per node the pods that never ran and the FailedMount events.
func (l *mountLoad) finish(t *check, ctx context.Context) map[string]mountCounts {
	if err := l.Stop(); err != nil {
		t.Errorf("inline-volume pods: %v", err)
	}
	never, _ := l.AwaitRan(ctx, podWait)
	if len(never) > 0 {
		t.Logf("inline-volume pods that never ran within %s after the rollout: %s", podWait, strings.Join(lastN(never, 20), ", "))
	}
	if err := l.DeleteAll(ctx); err != nil {
		t.Errorf("delete the inline-volume pods: %v", err)
	}
	deleted := time.Now()
	if err := l.AwaitNoPods(ctx, podWait); err != nil {
		t.Errorf("%v", err)
	} else if td, err := l.awaitTornDown(ctx, podWait, deleted); err != nil {
		t.Errorf("%v", err) // verify's own: could not check
	} else if len(td.Left) > 0 {
		t.Errorf("%s", td.text("on the instance the kubelet calls now"))
	}
	out := map[string]mountCounts{}
	pods := l.Pods()
	for _, p := range pods {
		c := out[p.Node]
		c.started++
		if !p.Ran {
			c.neverRan++
		}
		out[p.Node] = c
	}
	ev, err := l.Client.CoreV1().Events(l.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("the inline-volume pods' events: %v", err)
		return out
	}
	var msgs []string
	for _, e := range ev.Items {
		if e.Reason != "FailedMount" {
			continue
		}
		p, ok := pods[e.InvolvedObject.Name]
		if !ok {
			continue
		}
		c := out[p.Node]
		c.failed += int(max(e.Count, 1))
		out[p.Node] = c
		msgs = append(msgs, fmt.Sprintf("%s (x%d): %s", e.InvolvedObject.Name, max(e.Count, 1), e.Message))
	}
	sort.Strings(msgs)
	if len(msgs) > 0 {
		t.Logf("FailedMount events:\n%s", strings.Join(lastN(msgs, 10), "\n"))
	}
	return out
}
