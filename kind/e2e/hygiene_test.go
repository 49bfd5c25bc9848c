//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// What the rolling-update mode leaves in a real kubelet (issue 36, "Done
// when", on the local node): after hygieneRollouts rollouts of manifests/,
// the kubelet's plugin_manager_total_plugins lists at most one retired
// registration per rollout (plus the live one) and no path in its desired
// state only; after a kubelet restart with dead leftovers and after a
// simulated reboot, the kubelet dials each dead path at most once, never
// after hygieneWindow, and keeps none in its desired state only after it.
const (
	// hygieneRollouts is how many rollouts of manifests/ run.
	hygieneRollouts = 10
	// hygieneMaxActual bounds the driver's paths in the kubelet's actual
	// state after them: the live announcement and one retired per rollout.
	hygieneMaxActual = hygieneRollouts + 1
	// hygieneWindow: after it no dead path is dialed nor in the kubelet's
	// desired state only (the 60 s).
	hygieneWindow = 60 * time.Second
	// kubeletDialTimeout is how long the kubelet's dial of a registration
	// socket blocks on a dead one before it logs "dial failed"
	// (pluginmanager/operationexecutor: dialTimeoutDuration, 1.34-1.37): a
	// dial started within hygieneWindow has logged by hygieneWindow plus this
	// plus a round.
	kubeletDialTimeout = 10 * time.Second
	// dialFailed starts the kubelet's error of a registration attempt at a
	// path nothing serves; the path and ", err:" follow.
	dialFailed = "dial failed at socket "
	// hygieneLogLines is how much of the kubelet's log is read.
	hygieneLogLines = 200000
)

func TestRolloutHygiene(tt *testing.T) {
	t := withRecap(tt)
	if cl.Provider.Name() != "local" {
		t.Skipf("provider %s: the test reads the kubelet's /metrics on 127.0.0.1:10250 and plants sockets from this machine, which only the local node allows", cl.Provider.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	t.Cleanup(func() { restoreBase(t) })
	diagnoseOnFailure(t)
	node := allNodes[0]
	started := time.Now()

	// The mode installed, then a kubelet restart: its plugin manager starts
	// from what is on disk (the live announcement), whatever the tests
	// before this one left in it.
	installMode(t, ctx)
	if err := cl.Provider.RestartKubelet(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := cl.RolledOut(ctx, cfg.Driver, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// CSINode outlives the restart: the live announcement's registration
	// by the new kubelet is seen in its own metric.
	var actual, desiredOnly []string
	for deadline := time.Now().Add(time.Minute); len(actual) == 0; sleepUntil(t, ctx, time.Now().Add(kubeletRound)) {
		if actual, desiredOnly = kubeletPaths(t, ctx); len(actual) == 0 && time.Now().After(deadline) {
			t.Fatalf("the restarted kubelet has no path of %s in its actual state after a minute", cfg.Driver)
		}
	}
	logf("hygiene: after a kubelet restart, before the rollouts: %d path(s) of %s in the kubelet's actual state, %d in its desired state only", len(actual), cfg.Driver, len(desiredOnly))

	// 1. hygieneRollouts rollouts of manifests/, each to its end (the old
	// pod gone).
	t0 := time.Now()
	for i := 1; i <= hygieneRollouts; i++ {
		before, err := cl.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := setRolloutAnnotation(ctx, fmt.Sprintf("hygiene-%d-%d", t0.Unix(), i)); err != nil {
			t.Fatal(err)
		}
		if _, err := rolloutDone(ctx, cl, cfg.Driver, before, 3*time.Minute); err != nil {
			t.Fatalf("rollout %d: %v", i, err)
		}
	}
	logf("hygiene: %d rollouts of %s in %.1f s", hygieneRollouts, manifestsDir, time.Since(t0).Seconds())
	// The bounds within a window (a retired path the kubelet is still
	// dialing may leave its desired state in the meantime); the last counts
	// are reported either way.
	for deadline := time.Now().Add(hygieneWindow); ; {
		actual, desiredOnly = kubeletPaths(t, ctx)
		if len(actual) <= hygieneMaxActual && len(desiredOnly) == 0 || time.Now().After(deadline) {
			break
		}
		sleepUntil(t, ctx, time.Now().Add(kubeletRound))
	}
	logf("hygiene: after %d rollouts: %d path(s) of %s in the kubelet's actual state (bound %d), %d in its desired state only (bound 0)",
		hygieneRollouts, len(actual), cfg.Driver, hygieneMaxActual, len(desiredOnly))
	if len(actual) > hygieneMaxActual {
		t.Errorf("after %d rollouts the kubelet's actual state holds %d paths of %s, want at most %d: %s",
			hygieneRollouts, len(actual), cfg.Driver, hygieneMaxActual, strings.Join(actual, " "))
	}
	if len(desiredOnly) > 0 {
		t.Errorf("after %d rollouts %d paths of %s are in the kubelet's desired state only (it dials them again and again): %s",
			hygieneRollouts, len(desiredOnly), cfg.Driver, strings.Join(desiredOnly, " "))
	}

	// 2. A kubelet restart with dead leftovers: announcements of instances
	// killed (SIGKILL) whose pods are gone, as such a registrar leaves them
	// on disk (a socket nobody listens on), older than the live one.
	var dead []string
	for i := 1; i <= 2; i++ {
		dead = append(dead, plantDeadAnnouncement(t, fmt.Sprintf("e2e-leftover-%d-%d", t0.Unix(), i), time.Time{}))
	}
	if err := cl.Provider.RestartKubelet(ctx, node); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := cl.RolledOut(ctx, cfg.Driver, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	checkDeadPaths(t, ctx, node, "after a kubelet restart with dead leftovers", restarted, dead)

	// 3. A simulated reboot. The node cannot reboot under the test and its
	// boot time cannot move, so the reboot's traces are made instead: no
	// registrar runs (the DaemonSet deleted), the last announcement is a dead
	// socket last modified before the boot (its mtime set back; its ctime, which
	// no call sets, stays now), the kubelet starts and walks plugins_registry,
	// then the registrar's pod starts.
	if err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Delete(ctx, cl.DaemonSet, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := cl.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitGone(ctx, pods, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	boot := bootTime(t)
	dead = []string{plantDeadAnnouncement(t, fmt.Sprintf("e2e-reboot-%d", t0.Unix()), boot.Add(-time.Hour))}
	if err := cl.Provider.RestartKubelet(ctx, node); err != nil {
		t.Fatal(err)
	}
	restarted = time.Now()
	if err := cl.Apply(ctx, manifestsDir); err != nil {
		t.Fatal(err)
	}
	if err := cl.RolledOut(ctx, cfg.Driver, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	logf("hygiene: simulated reboot: the registrar's pod Ready %.1f s after the kubelet restarted", time.Since(restarted).Seconds())
	checkDeadPaths(t, ctx, node, "after a simulated reboot", restarted, dead)
	logf("hygiene: test time %.1f s", time.Since(started).Seconds())
}

// checkDeadPaths waits until hygieneWindow after since, then checks that no
// path of the driver is in the kubelet's desired state only; then, once a
// dial started before then has logged, that the kubelet's log has at most
// one dial failure per path of the driver since since, none after the
// window. The kubelet dials only paths of its desired state, so a path out
// of it at the window's end is never dialed again: with no line between
// the window's end and then, none comes after it (the kubelet's backoff
// can put a redial of a path still there minutes later: the desired-state
// check catches those). The counts are logged per path, dead's included
// when the log has none.
func checkDeadPaths(t *recapT, ctx context.Context, node, what string, since time.Time, dead []string) {
	t.Helper()
	for _, p := range dead {
		if _, err := os.Lstat(p); err == nil {
			logf("hygiene: %s: the dead socket %s is still there", what, filepath.Base(p))
		}
	}
	sleepUntil(t, ctx, since.Add(hygieneWindow))
	_, desiredOnly := kubeletPaths(t, ctx)
	logf("hygiene: %s: %d path(s) of %s in the kubelet's desired state only %s after (bound 0)", what, len(desiredOnly), cfg.Driver, hygieneWindow)
	if len(desiredOnly) > 0 {
		t.Errorf("%s: %s after, %d paths of %s are in the kubelet's desired state only (it dials them again and again): %s",
			what, hygieneWindow, len(desiredOnly), cfg.Driver, strings.Join(desiredOnly, " "))
	}
	sleepUntil(t, ctx, since.Add(hygieneWindow+kubeletDialTimeout+kubeletRound))
	log, err := cl.Provider.KubeletLog(ctx, node, hygieneLogLines)
	if err != nil {
		t.Fatal(err)
	}
	count, late := dialFailures(log, since, since.Add(hygieneWindow))
	for _, p := range dead {
		if _, ok := count[p]; !ok {
			count[p] = 0
		}
	}
	var paths []string
	for p := range count {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		logf("hygiene: %s: %s: %d \"dial failed\" line(s), %d after %s (bound 1, 0 after)", what, filepath.Base(p), count[p], late[p], hygieneWindow)
		if count[p] > 1 {
			t.Errorf("%s: the kubelet failed to dial %s %d times, want at most 1", what, p, count[p])
		}
		if late[p] > 0 {
			t.Errorf("%s: the kubelet failed to dial %s %d times later than %s after, want none", what, p, late[p], hygieneWindow)
		}
	}
}

// sleepUntil waits until at: the end of an observation window, not a wait
// for a state.
func sleepUntil(t testing.TB, ctx context.Context, at time.Time) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(at)):
	}
}

// dialFailures counts the kubelet's "dial failed" lines from since on per
// socket path of the driver's announcements (plugins_registry and the
// mode's name prefix), and those after late.
func dialFailures(log string, since, late time.Time) (count, after map[string]int) {
	count, after = map[string]int{}, map[string]int{}
	prefix := filepath.Join(PluginsRegistry, csiplugin.RollingUpdatePrefix(cfg.Driver)+"_")
	for _, line := range strings.Split(log, "\n") {
		at, ok := kubeletlog.Time(line, since)
		if !ok || at.Before(since) {
			continue
		}
		_, rest, ok := strings.Cut(line, dialFailed)
		if !ok {
			continue
		}
		path, _, _ := strings.Cut(rest, ",")
		if !strings.HasPrefix(path, prefix) {
			continue
		}
		count[path]++
		if at.After(late) {
			after[path]++
		}
	}
	return count, after
}

// kubeletPaths reads the kubelet's plugin_manager_total_plugins for the
// driver's paths: those in its actual state, and those in its desired
// state only.
func kubeletPaths(t testing.TB, ctx context.Context) (actual, desiredOnly []string) {
	t.Helper()
	for _, s := range kubeletPluginSockets(t, ctx, filepath.Join(PluginsRegistry, cfg.Driver)) {
		path, states, _ := strings.Cut(s, " ")
		switch {
		case strings.Contains(states, "actual_state_of_world"):
			actual = append(actual, filepath.Base(path))
		case strings.Contains(states, "desired_state_of_world"):
			desiredOnly = append(desiredOnly, filepath.Base(path))
		}
	}
	return actual, desiredOnly
}

// plantDeadAnnouncement leaves in plugins_registry a dead announcement
// socket of the driver (bound, then its listener closed without the unlink)
// for the instance of pod UID uid, older than any live one; a non-zero
// mtime is set as its modification time. It is removed at the end of the
// test if still there.
func plantDeadAnnouncement(t testing.TB, uid string, mtime time.Time) string {
	t.Helper()
	version := uint64(time.Now().Add(-time.Hour).UnixMilli())
	path := filepath.Join(PluginsRegistry, csiplugin.RollingUpdateSocketName(cfg.Driver, csiplugin.InstanceID(uid), version))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
	if !mtime.IsZero() {
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	logf("hygiene: planted the dead announcement %s", filepath.Base(path))
	return path
}

// bootTime is when this node booted: btime in /proc/stat.
func bootTime(t testing.TB) time.Time {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("/proc/stat: btime %q: %v", v, err)
			}
			return time.Unix(secs, 0)
		}
	}
	t.Fatal(errors.New("/proc/stat has no btime line"))
	return time.Time{}
}
