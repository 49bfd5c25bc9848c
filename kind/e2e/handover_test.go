//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
)

// The handover (docs/design.md, "The handover") with a real kubelet: the
// reference DaemonSet (manifests/, --rolling-update: the handover) rolled
// out -handover-rollouts times, then -handover-load-rollouts times more
// while pods with an inline volume of the driver start on every node (the
// stream fills a node's pod slots if it runs through all of them). The
// kubelet must see nothing: no RegisterPlugin or DeRegisterPlugin of the
// driver, no failed mount, the Node annotation and the CSINode entry never
// absent, one path of the driver in its plugin manager.
const handoverDir = manifestsDir

var (
	handoverRollouts     = flag.Int("handover-rollouts", 10, "rollouts of TestHandoverRollouts without a workload")
	handoverLoadRollouts = flag.Int("handover-load-rollouts", 3, "rollouts of TestHandoverRollouts under inline-volume pods")
)

// handoverLoadEvery is the workload's pace in TestHandoverRollouts: slower
// than TestRollingUpdate's, whose two rollouts are over in seconds; through
// three, on a busy node, 300 ms filled the node's pod slots (110), and the
// scheduler preempted workload pods to place the DaemonSet's surge pod.
const handoverLoadEvery = time.Second

// rollOut rolls the DaemonSet out once (the annotation's value v) and
// waits until every node runs the new pod alone.
func rollOut(t testing.TB, ctx context.Context, v string) {
	t.Helper()
	start := time.Now()
	if err := setRolloutAnnotation(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := cl.RolledOut(ctx, cfg.Driver, 5*time.Minute); err != nil {
		t.Fatalf("rollout %s: %v", v, err)
	}
	logf("rollout %s: rolled out in %s", v, time.Since(start).Round(100*time.Millisecond))
}

func TestHandoverRollouts(tt *testing.T) {
	t := withRecap(tt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	loadExampleImage(t, ctx)
	t.Cleanup(func() { restoreBase(t) })
	diagnoseOnFailure(t)

	install(t, ctx, handoverDir)
	for _, n := range allNodes {
		checkRegistered(tt, ctx, n)
	}
	// The kubelet may still hold registrations the suite's earlier tests of
	// the rolling-update mode retired: the rollouts must add none.
	var before []string
	if cl.Provider.Name() == "local" {
		before, _ = kubeletPaths(t, ctx)
	}
	recs := recordRegistration(t, ctx)
	from := positions(recs)
	since := time.Now()
	for i := 1; i <= *handoverRollouts; i++ {
		rollOut(t, ctx, fmt.Sprintf("handover-%d", i))
	}
	wl := startWorkloadEvery(t, ctx, handoverLoadEvery)
	for i := 1; i <= *handoverLoadRollouts; i++ {
		rollOut(t, ctx, fmt.Sprintf("handover-load-%d", i))
	}
	started, never, err := stopWorkload(ctx, wl, 3*time.Minute)
	if err != nil {
		t.Errorf("workload: %v; pods that never ran: %v", err, never)
	}
	total := *handoverRollouts + *handoverLoadRollouts
	logf("%d rollouts done, the last %d under load: %d workload pods started meanwhile, each ran and was deleted", total, *handoverLoadRollouts, started)

	for _, n := range allNodes {
		for _, r := range []*Recorder{recs[n].node, recs[n].csinode} {
			if err := r.Err(); err != nil {
				t.Errorf("node %s: the watch broke, so a gap may have been missed: %v", n, err)
			}
		}
		if gaps := registrationGaps(recs[n], from[n], cfg.Driver, n); len(gaps) > 0 {
			t.Errorf("node %s: the driver was unregistered during the rollouts: %s", n, strings.Join(gaps, "; "))
		}
		log, err := cl.Provider.KubeletLog(ctx, n, 50000)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		for _, line := range strings.Split(log, "\n") {
			at, ok := kubeletlog.Time(line, since)
			if !ok || at.Before(since) {
				continue
			}
			if strings.Contains(line, kubeletlog.RegisterLine(cfg.Driver)) || strings.Contains(line, "DeRegisterPlugin request for plugin "+cfg.Driver) ||
				strings.Contains(line, "MountVolume.SetUp failed") {
				calls++
				t.Errorf("node %s: the kubelet's log during the rollouts: %s", n, line)
			}
		}
		logf("node %s: %d RegisterPlugin/DeRegisterPlugin/failed-mount lines in the kubelet's log during %d rollouts", n, calls, total)
	}
	awaitWorkloadGone(t, ctx)
	// The kubelet's own metric: only the local node's kubelet answers on
	// 127.0.0.1:10250 (kind's answer inside their containers).
	if cl.Provider.Name() == "local" {
		actual, desiredOnly := kubeletPaths(t, ctx)
		logf("the kubelet's plugin manager after %d rollouts: actual state %v (before them %v), desired only %v", total, actual, before, desiredOnly)
		plain := cfg.Driver + "-reg.sock"
		var added []string
		for _, p := range actual {
			if p != plain && !slices.Contains(before, p) {
				added = append(added, p)
			}
		}
		if !slices.Contains(actual, plain) || len(added) > 0 || len(desiredOnly) != 0 {
			t.Errorf("the kubelet's plugin manager holds %v in its actual state (before the rollouts %v) and %v in its desired state only; want %s, no path added, none desired only",
				actual, before, desiredOnly, plain)
		}
	}
	for _, n := range allNodes {
		checkRegistered(tt, ctx, n)
	}
}
