//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

// The rolling-update mode with a real kubelet: the reference DaemonSet of
// manifests/ (maxSurge: 1, the mode on) is rolled out while pods with a CSI
// inline volume of the driver start on every node, throughout and after the
// rollout. The driver must never leave the
// kubelet's registration.
const (
	rolloutNamespace = "csi-e2e-rollout"
	// rolloutEvery is how often a workload pod is started (round robin
	// over the nodes).
	rolloutEvery = 300 * time.Millisecond
	// rolloutAnnotation changes the pod template: each value is a rollout.
	rolloutAnnotation = "e2e.csi-registrar.io/rollout"
)

// nodeRecorders watch one node's Node object and CSINode.
type nodeRecorders struct{ node, csinode *Recorder }

func recordRegistration(t testing.TB, ctx context.Context) map[string]nodeRecorders {
	t.Helper()
	recs := map[string]nodeRecorders{}
	for _, n := range allNodes {
		nr, err := cl.RecordNode(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := cl.RecordCSINode(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		recs[n] = nodeRecorders{nr, cr}
		t.Cleanup(func() { nr.Stop(); cr.Stop() })
	}
	return recs
}

type recorderPos struct{ node, csinode int }

func positions(recs map[string]nodeRecorders) map[string]recorderPos {
	out := map[string]recorderPos{}
	for n, r := range recs {
		out[n] = recorderPos{r.node.Len(), r.csinode.Len()}
	}
	return out
}

// gapsSince measures the driver's registration on node from the positions
// on, up to end (drivercases.MeasureGaps: judged by csiplugin's rule on the
// Node and CSINode as recorded; the last events before the positions give
// the state there).
func gapsSince(r nodeRecorders, from recorderPos, driver, node string, end time.Time) drivercases.RegistrationGaps {
	nodeEvs, cnEvs := r.node.Events(max(from.node-1, 0)), r.csinode.Events(max(from.csinode-1, 0))
	var start time.Time
	for _, evs := range [][]Event{nodeEvs, cnEvs} {
		if len(evs) > 0 && evs[0].At.After(start) {
			start = evs[0].At
		}
	}
	return drivercases.MeasureGaps(node, driver, nodeEvs, cnEvs, start, end)
}

// registrationGaps lists the times, from the positions on, when the driver
// was not registered on node.
func registrationGaps(r nodeRecorders, from recorderPos, driver, node string) []string {
	var gaps []string
	for _, s := range gapsSince(r, from, driver, node, time.Now()).Unregistered {
		gaps = append(gaps, "unregistered "+s.String())
	}
	return gaps
}

func podUID(p *corev1.Pod) types.UID {
	if p == nil {
		return ""
	}
	return p.UID
}

func setRolloutAnnotation(ctx context.Context, v string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, rolloutAnnotation, v)
	_, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Patch(ctx, cl.DaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// startWorkloadEvery starts pods with an inline volume of the driver, one
// every interval, round robin over the nodes, in a namespace of its own, and
// deletes each once it runs (drivercases.MountLoad, the load of verify's
// rollout cases).
func startWorkloadEvery(t testing.TB, ctx context.Context, every time.Duration) *drivercases.MountLoad {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rolloutNamespace}}
	if _, err := cl.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl.Client.CoreV1().Namespaces().Delete(ctx, rolloutNamespace, metav1.DeleteOptions{})
	})
	w := &drivercases.MountLoad{Client: cl.Client, Namespace: rolloutNamespace, Nodes: allNodes, Every: every, Pod: workloadPod}
	w.Start(ctx)
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// stopWorkload ends the workload, then deletes the pods that still run until
// every pod ran or timeout passes; it returns how many were started and
// those that never ran.
func stopWorkload(ctx context.Context, w *drivercases.MountLoad, timeout time.Duration) (started int, never []string, err error) {
	if err := w.Stop(); err != nil {
		return 0, nil, err
	}
	never, err = w.AwaitRan(ctx, timeout)
	return len(w.Pods()), never, err
}

// workloadPod writes to an inline volume of the suite's driver, bound to
// node (none: the scheduler places it).
func workloadPod(name, node string) *corev1.Pod {
	no, yes, uid := false, true, int64(65532)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rolloutNamespace},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid},
			Containers: []corev1.Container{{
				Name: "writer", Image: "csi-registrar-example:dev", ImagePullPolicy: corev1.PullIfNotPresent,
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
				CSI: &corev1.CSIVolumeSource{Driver: cfg.Driver},
			}}},
		},
	}
}

// failedMounts fails the test for each FailedMount event of the workload.
func failedMounts(t testing.TB, ctx context.Context) {
	t.Helper()
	l, err := cl.Client.CoreV1().Events(rolloutNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, e := range l.Items {
		if e.Reason == "FailedMount" || e.Reason == "FailedUnmount" {
			bad = append(bad, fmt.Sprintf("%s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("workload event: %s", b)
	}
}

// awaitWorkloadGone waits until the deleted workload pods are gone (their
// volumes unpublished), then checks the events.
func awaitWorkloadGone(t testing.TB, ctx context.Context) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cl.Client.CoreV1().Pods(rolloutNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		t.Errorf("workload pods not removed: %v", err)
	}
	failedMounts(t, ctx)
}

// install replaces the suite's deployment (plainDir) by dir's and waits
// until it rolled out.
func install(t testing.TB, ctx context.Context, dir string) {
	t.Helper()
	if err := cl.Delete(ctx, plainDir); err != nil {
		t.Fatal(err)
	}
	if err := cl.Apply(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := cl.RolledOut(ctx, cfg.Driver, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// restoreBase puts the suite's deployment back (plainDir: without the mode)
// for the tests that follow.
func restoreBase(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Apply(ctx, plainDir); err != nil {
		t.Errorf("restore %s: %v", plainDir, err)
		return
	}
	if err := cl.WaitDeployed(ctx, cfg, 2*time.Minute); err != nil {
		t.Errorf("restore %s: %v", plainDir, err)
	}
}

// rolloutDone waits for the end of a rollout step: the DaemonSet rolled out
// (within timeout), the old pods (before) gone, the driver registered; it
// returns that moment. Then it watches one kubeletRound more and waits until
// the driver is registered again: the old pods' exit is part of the step (a
// registrar without the mode unlinks its socket by name as it exits), and the
// kubelet unregisters the driver in its next round, which may come after the
// pod object is gone (seen on kind: 0.3 s after). The round is an
// observation window, not a wait for a state.
func rolloutDone(ctx context.Context, c *Cluster, driver string, before map[string]*corev1.Pod, timeout time.Duration) (time.Time, error) {
	if err := c.RolledOut(ctx, driver, timeout); err != nil {
		return time.Time{}, err
	}
	if err := awaitGone(ctx, before, 2*time.Minute); err != nil {
		return time.Time{}, err
	}
	if err := c.RolledOut(ctx, driver, 2*time.Minute); err != nil {
		return time.Time{}, fmt.Errorf("after the old pods left: %w", err)
	}
	done := time.Now()
	time.Sleep(kubeletRound)
	if err := c.RolledOut(ctx, driver, 2*time.Minute); err != nil {
		return time.Time{}, fmt.Errorf("%s after the old pods left: %w", kubeletRound, err)
	}
	return done, nil
}

// awaitGone waits until none of pods exists any more.
func awaitGone(ctx context.Context, pods map[string]*corev1.Pod, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, p := range pods {
			got, err := cl.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, err
			case got.UID == p.UID:
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("old pods %v not gone within %s: %w", left, timeout, err)
	}
	return nil
}

func orNone(gaps []string) string {
	if len(gaps) == 0 {
		return "never unregistered"
	}
	return strings.Join(gaps, "; ")
}
