//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
)

// holdOldPod is the DaemonSet's minReadySeconds while the case runs: the
// controller's rolling update deletes the old pod only once the new one has
// been Ready this long, which leaves the window in which the new pod's
// driver dies after its confirmation while the old pod still runs. Its
// manage loop also deletes an old pod that is not Ready beside a new one,
// whatever minReadySeconds (kubernetes pkg/controller/daemon,
// podsShouldBeOnNode): a standing-by instance whose driver is ready is a
// fallback and answers /readyz 200, so the old pod stays. The kill comes as
// soon as the new pod is Ready; once the new instance has taken the
// registration back and its pod is Ready again, minReadySeconds is restored
// and the old pod goes.
const holdOldPod = 300

// TestRollingUpdateNewerDriverDies: in the mode (manifests/), a rollout
// whose new pod is confirmed by the kubelet, then its driver container is
// killed while the old pod still runs. The old instance must take the
// registration back (the kubelet's CSI handler registers the old pod's
// endpoint again) without the kubelet unregistering the driver, and the new
// one must take it again only after its restarted driver has been ready for
// the stable window (10 s), once. The times are measured from the kubelet's
// own log (its "Register new plugin" lines name the endpoint).
func TestRollingUpdateNewerDriverDies(tt *testing.T) {
	t := withRecap(tt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() { restoreBase(t) })
	diagnoseOnFailure(t)

	installMode(t, ctx)
	recs := recordRegistration(t, ctx)
	from := positions(recs)
	before, err := cl.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A rollout that keeps the old pods (minReadySeconds), restored when
	// the case ends (kubectl apply leaves a field it never set).
	patch := fmt.Sprintf(`{"spec":{"minReadySeconds":%d,"template":{"metadata":{"annotations":{%q:"driver-down"}}}}}`, holdOldPod, rolloutAnnotation)
	if _, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Patch(ctx, cl.DaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Patch(ctx, cl.DaemonSet, types.StrategicMergePatchType,
			[]byte(`{"spec":{"minReadySeconds":0}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("restore minReadySeconds: %v", err)
		}
	}
	t.Cleanup(restore)

	nw := awaitNewPod(t, ctx, before)
	n := nw.Spec.NodeName
	old := before[n]
	if old == nil {
		t.Fatalf("no old pod on %s", n)
	}
	nw = awaitPod(t, ctx, nw.UID, "the new pod Ready (its instance confirmed by the kubelet)", func(p *corev1.Pod) bool { return drivercases.PodReady(p) })
	driver := drivercases.ContainerStatus(nw, "driver")
	logf("new pod %s on %s Ready beside the old pod %s; killing its driver container", nw.Name, n, old.Name)

	t0 := time.Now()
	if err := cl.Provider.KillContainer(ctx, n, drivercases.ContainerID(driver)); err != nil {
		t.Fatal(err)
	}
	oldEndpoint, newEndpoint := string(old.UID)+".sock", string(nw.UID)+".sock"
	backOld := awaitRegister(t, ctx, n, oldEndpoint, t0, time.Minute, "the kubelet registering the old pod's endpoint again")
	measure(t, "newer driver killed -> the kubelet registers the old pod's endpoint", backOld.Sub(t0))

	restarted := awaitPod(t, ctx, nw.UID, "the new pod's driver restarted and the pod Ready again", func(p *corev1.Pod) bool {
		return drivercases.PodReady(p) && drivercases.ContainerStatus(p, "driver").RestartCount > driver.RestartCount
	})
	started := drivercases.ContainerStatus(restarted, "driver").State.Running
	backNew := awaitRegister(t, ctx, n, newEndpoint, backOld, time.Minute, "the kubelet registering the new pod's endpoint again")
	if started != nil {
		// startedAt has a resolution of one second.
		measure(t, "newer driver restarted -> the kubelet registers the new pod's endpoint again", backNew.Sub(started.StartedAt.Time))
		if d := backNew.Sub(started.StartedAt.Time); d < 9*time.Second {
			t.Errorf("the new pod's endpoint was registered again %s after its driver restarted, before the stable window (10 s)", d.Round(time.Millisecond))
		}
	}
	// The old pod, standing by again as a fallback, stays Ready (see
	// holdOldPod) until minReadySeconds is restored; the new instance then
	// announces once more, as the survivor.
	// Until minReadySeconds is restored the old pod cannot go: the window
	// ends there (its deletionTimestamp has a second's resolution and may
	// fall before the new pod's last registration when the deletion follows
	// it within the second).
	awaitPod(t, ctx, old.UID, "the old pod Ready, standing by as the fallback", func(p *corev1.Pod) bool { return drivercases.PodReady(p) })
	held := time.Now()
	restore()
	awaitDeleted(t, ctx, old.UID, 2*time.Minute)
	log, err := cl.Provider.KubeletLog(ctx, n, 20000)
	if err != nil {
		t.Fatal(err)
	}
	if got := registersBetween(log, newEndpoint, backOld, held); got != 1 {
		t.Errorf("the kubelet registered the new pod's endpoint %d times after the old one took it back and while minReadySeconds held the old pod, want once", got)
	}
	if got := registersBetween(log, oldEndpoint, t0, time.Now()); got != 1 {
		t.Errorf("the kubelet registered the old pod's endpoint %d times after the kill, want once", got)
	}
	for _, line := range strings.Split(log, "\n") {
		if at, ok := kubeletlog.Time(line, t0); ok && !at.Before(t0) && strings.Contains(line, "DeRegisterPlugin request for plugin "+cfg.Driver) {
			t.Errorf("node %s: the kubelet unregistered the driver: %s", n, line)
		}
	}

	restore()
	if err := cl.RolledOut(ctx, cfg.Driver, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range allNodes {
		if gaps := registrationGaps(recs[n], from[n], cfg.Driver, n); len(gaps) > 0 {
			t.Errorf("node %s: the driver was unregistered: %s", n, strings.Join(gaps, "; "))
		}
	}
}

// awaitPod waits until the pod with uid satisfies cond, and returns it.
func awaitPod(t testing.TB, ctx context.Context, uid types.UID, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cl.Client.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cl.Selector})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if l.Items[i].UID == uid && cond(&l.Items[i]) {
				got = &l.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return got
}

// awaitRegister waits until the kubelet's log on node has a registration of
// the driver at an endpoint ending in endpoint after since, and returns its time.
func awaitRegister(t testing.TB, ctx context.Context, node, endpoint string, since time.Time, timeout time.Duration, what string) time.Time {
	t.Helper()
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		log, err := cl.Provider.KubeletLog(ctx, node, 20000)
		if err != nil {
			return false, nil
		}
		at = firstRegister(log, endpoint, since)
		return !at.IsZero(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return at
}

// firstRegister is the time of the first registration of the driver at
// endpoint logged after since (zero: none).
func firstRegister(log, endpoint string, since time.Time) time.Time {
	for _, line := range strings.Split(log, "\n") {
		if at, ok := kubeletlog.Time(line, since); ok && at.After(since) && isRegister(line, endpoint) {
			return at
		}
	}
	return time.Time{}
}

// registersBetween counts the registrations of the driver at endpoint
// logged after since and before until.
func registersBetween(log, endpoint string, since, until time.Time) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if at, ok := kubeletlog.Time(line, since); ok && at.After(since) && at.Before(until) && isRegister(line, endpoint) {
			n++
		}
	}
	return n
}

// awaitDeleted waits until the pod with uid is being deleted or gone.
func awaitDeleted(t testing.TB, ctx context.Context, uid types.UID, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := cl.Client.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cl.Selector})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if p := &l.Items[i]; p.UID == uid {
				return p.DeletionTimestamp != nil, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the old pod's deletion: %v", err)
	}
}

func isRegister(line, endpoint string) bool {
	return strings.Contains(line, kubeletlog.RegisterLine(cfg.Driver)) && strings.HasSuffix(strings.TrimSpace(line), "/"+endpoint)
}
