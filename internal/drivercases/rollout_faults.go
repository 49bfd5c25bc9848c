package drivercases

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/sockowner"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The faults of cases 2-5, as case 8 injects them during rollouts.
const (
	faultPodDeleted     = "pod deleted"
	faultKubeletRestart = "kubelet restarted"
	faultSocketRemoved  = "registration socket removed"
	faultDriverKilled   = "driver container killed"
)

// Case 8's settings.
const (
	defaultRollouts = 10
	// faultWithin: a fault is injected at a random moment this long after
	// the template change, while the new and the old pod overlap.
	faultWithin = 3 * time.Second
)

// 8. Rollouts with faults (only when chosen): opt.Rollouts rollouts of the
// workload, as case 6 makes one, each with one fault of cases 2-5 drawn at
// random and injected at a random moment within faultWithin of the template
// change, on the node the faults act on, while inline-volume pods start
// throughout (as in case 6). It reports, for that node, how long the driver
// was registered over the whole run, the failed mounts, the container
// restarts besides those a killed driver causes, and the open files,
// threads and resident memory of the process serving the registration
// socket and the files in plugins_registry, before and after. The faults
// unregister the driver by design (a removed socket; a deleted pod without
// the mode): the verdict is "measured", FAIL only when the driver is not
// registered at the end or plugins_registry holds more files than before.
func (s *suite) rolloutsWithFaults(t *check) {
	ctx, n, _ := s.begin(t)
	d := s.d
	w := d.spec.Workload
	if w.OnDelete() {
		t.Skipf("%s has updateStrategy OnDelete: a template change rolls out nothing", w)
	}
	rollouts := s.opt.Rollouts
	if rollouts <= 0 {
		rollouts = defaultRollouts
	}
	faults := []string{faultPodDeleted, faultKubeletRestart, faultSocketRemoved}
	if d.driverErr == nil {
		faults = append(faults, faultDriverKilled)
	}
	nodeRec, cnRec := s.recordNode(t, ctx, n)
	podRec := s.recordPods(t, ctx)
	before := s.nodeFigures(ctx, n)
	t.Logf("node %s before: %s", n, before)

	var load *mountLoad
	if why := s.inlineVolumes(ctx); why == "" {
		load = s.newMountLoad(t, ctx, []string{n})
		if why := load.baseline(ctx); why != "" {
			t.addNote("mounts not measured: " + why)
			load = nil
		}
	} else {
		t.addNote("mounts not measured: " + why)
	}
	t.mounts = load != nil

	t0 := time.Now()
	if load != nil {
		load.Start(ctx)
	}
	var injected []string
	kills := 0
	for i := 1; i <= rollouts; i++ {
		prev, err := s.podUIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fault := faults[rand.IntN(len(faults))]
		delay := rand.N(faultWithin)
		start := time.Now()
		if err := s.patchTemplate(ctx, fmt.Sprintf("soak-%d-%s", i, start.UTC().Format(time.RFC3339Nano))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(delay):
		}
		if err := s.inject(ctx, n, fault); err != nil {
			t.Logf("rollout %d: %s at +%s: %v", i, fault, delay.Round(time.Millisecond), err)
			injected = append(injected, fmt.Sprintf("%d: %s (not injected: %v)", i, fault, err))
		} else {
			injected = append(injected, fmt.Sprintf("%d: %s at +%.1fs", i, fault, delay.Seconds()))
			if fault == faultDriverKilled {
				kills++
			}
		}
		done, err := s.awaitRolledOut(ctx, prev, rolloutWait)
		if err != nil {
			if load != nil {
				_ = load.Stop() // the case ends on err
			}
			t.Fatal(err)
		}
		// Registered again before the next rollout (a fault may have
		// unregistered it; measured, not awaited blindly).
		_, _, _ = cnRec.Await(ctx, cnRec.Len()-1, podWait, "CSINode entry", entryOf(n, d.name))
		t.Logf("rollout %d (%s at +%s): rolled out in %.1f s", i, fault, delay.Round(time.Millisecond), done.Sub(start).Seconds())
	}
	if load != nil {
		_ = load.Stop() // finish reports its error
	}
	if err := s.updateNodes(ctx, d); err != nil {
		t.Fatal(err)
	}
	errCN, errAn := awaitRegistered(ctx, n, d.name, nodeRec, cnRec, podWait)
	end := time.Now()
	if errCN != nil || errAn != nil {
		t.Errorf("node %s: the driver is not registered after the last rollout: %v %v", n, errCN, errAn)
	}
	t.Logf("faults: %s", strings.Join(injected, "; "))

	nr := &report.NodeRollout{Node: n}
	for _, rec := range []*record.Recorder{nodeRec, cnRec} {
		if err := rec.Err(); err != nil {
			nr.WatchBroke = err.Error()
		}
	}
	_, _, all := registrationAbsences(n, d.name, nodeRec, cnRec, t0, end)
	nr.Gaps, nr.Unregistered = len(all), TotalOf(all).Seconds()
	total := end.Sub(t0).Seconds()
	if load != nil {
		c := load.finish(t, ctx)[n]
		nr.Started, nr.FailedMounts, nr.NeverRan = c.started, c.failed, c.neverRan
	}
	restarts, how := podRestarts(podRec.Events(0), s.cl.Namespace)
	for _, h := range how {
		t.Logf("node %s: restarted container %s", n, h)
	}
	if lines := s.deregistrations(ctx, n, t0); len(lines) > 0 {
		t.Logf("node %s: the kubelet's log has %d line(s) unregistering the driver or failing a mount since the first rollout; the last: %s", n, len(lines), strings.Join(lastN(lines, 4), " | "))
		t.addNote(fmt.Sprintf("the kubelet's log: %d line(s) unregistering the driver or failing a mount", len(lines)))
	}
	after := s.nodeFigures(ctx, n)
	t.Logf("node %s: %d rollouts in %.1f s; registered %.1f%% of the time (unregistered %.3f s in %d gap(s): %s); inline-volume pods %d started, %d FailedMount events, %d never ran",
		n, rollouts, total, 100*(1-nr.Unregistered/total), nr.Unregistered, nr.Gaps, spansText(all), nr.Started, nr.FailedMounts, nr.NeverRan)
	t.Logf("node %s: container restarts %s (driver containers killed: %d)", n, restartsText(restarts), kills)
	t.Logf("node %s after: %s", n, after)
	t.rollout = []report.NodeRollout{*nr}
	t.verdict = report.VerdictMeasured
	t.addNote(fmt.Sprintf("%d rollouts, %.0f s, registered %.1f%%; restarts %s (killed %d); before: %s; after: %s",
		rollouts, total, 100*(1-nr.Unregistered/total), restartsText(restarts), kills, before, after))
	if before.registryFiles >= 0 && after.registryFiles > before.registryFiles {
		t.Errorf("node %s: plugins_registry holds %d files after the rollouts, %d before: %s", n, after.registryFiles, before.registryFiles, strings.Join(after.names, " "))
	}
}

// inject applies one fault on node.
func (s *suite) inject(ctx context.Context, node, fault string) error {
	switch fault {
	case faultPodDeleted:
		p, err := s.anyPodOn(ctx, node)
		if err != nil {
			return err
		}
		return s.cl.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	case faultKubeletRestart:
		return s.cl.Node.RestartKubelet(ctx, node)
	case faultSocketRemoved:
		name, err := s.currentRegSocket(ctx, node)
		if err != nil {
			return err
		}
		return s.cl.Node.RemoveFile(ctx, node, PluginsRegistry+"/"+name)
	case faultDriverKilled:
		p, err := s.anyPodOn(ctx, node)
		if err != nil {
			return err
		}
		id := ContainerID(ContainerStatus(p, s.d.driver))
		if id == "" {
			return fmt.Errorf("pod %s: container %s does not run", p.Name, s.d.driver)
		}
		return s.cl.Node.KillContainer(ctx, node, id)
	}
	return fmt.Errorf("unknown fault %q", fault)
}

// anyPodOn returns one of the workload's pods on node that are not
// terminating, drawn at random: during a rollout with maxSurge the old and
// the new pod run side by side, and a fault may hit either.
func (s *suite) anyPodOn(ctx context.Context, node string) (*corev1.Pod, error) {
	l, err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.cl.Selector})
	if err != nil {
		return nil, err
	}
	var on []*corev1.Pod
	for i := range l.Items {
		if p := &l.Items[i]; p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			on = append(on, p)
		}
	}
	if len(on) == 0 {
		return nil, fmt.Errorf("no pod of %s on %s", s.d.spec.Workload, node)
	}
	return on[rand.IntN(len(on))], nil
}

// nodeFigures are what case 8 compares before and after: the process that
// serves the registration socket, and plugins_registry.
type nodeFigures struct {
	pid                 int
	fds, threads, rssKB int // -1: unknown
	registryFiles       int // -1: unknown
	names               []string
	err                 string
}

func (f nodeFigures) String() string {
	s := fmt.Sprintf("plugins_registry %d files", f.registryFiles)
	if f.pid > 0 {
		s += fmt.Sprintf("; registration socket served by pid %d: %d open files, %d threads, RSS %d KiB", f.pid, f.fds, f.threads, f.rssKB)
	}
	if f.err != "" {
		s += " (" + f.err + ")"
	}
	return s
}

// procFiguresScript prints the open files, threads and resident memory
// (KiB) of process $1.
const procFiguresScript = `set -e; n=$(ls /proc/"$1"/fd | wc -l); awk -v n="$n" '/^Threads:/{t=$2} /^VmRSS:/{r=$2} END{print n, t, r}' /proc/"$1"/status`

func (s *suite) nodeFigures(ctx context.Context, node string) nodeFigures {
	f := nodeFigures{fds: -1, threads: -1, rssKB: -1, registryFiles: -1}
	files, err := s.cl.Node.PluginsRegistry(ctx, node)
	if err != nil {
		f.err = err.Error()
		return f
	}
	f.registryFiles, f.names = len(files), names(files)
	name, err := s.currentRegSocket(ctx, node)
	if err != nil {
		f.err = err.Error()
		return f
	}
	path := PluginsRegistry + "/" + name
	out, err := s.cl.Node.NodeSh(ctx, node, sockowner.Script, path)
	if err != nil {
		f.err = err.Error()
		return f
	}
	found, err := sockowner.Parse(node, path, out)
	if err != nil || len(found.Owners) == 0 {
		f.err = fmt.Sprintf("no process listens on %s: %v", path, err)
		return f
	}
	f.pid = found.Owners[0].PID
	out, err = s.cl.Node.NodeSh(ctx, node, procFiguresScript, strconv.Itoa(f.pid))
	if err != nil {
		f.err = err.Error()
		return f
	}
	if w := strings.Fields(out); len(w) == 3 {
		f.fds, _ = strconv.Atoi(w[0])
		f.threads, _ = strconv.Atoi(w[1])
		f.rssKB, _ = strconv.Atoi(w[2])
	}
	return f
}

// podRestarts sums, per container name, the highest restart count each pod
// of namespace reached in the recorded events, and says how each restarted
// container had ended (its last termination: reason, exit code, message).
func podRestarts(evs []record.Event, namespace string) (map[string]int32, []string) {
	top := map[string]map[string]int32{} // pod UID → container → count
	ended := map[string]string{}         // pod/container#count → how
	for _, ev := range evs {
		for _, p := range ev.State.Pods() {
			if p.Namespace != namespace {
				continue
			}
			m := top[string(p.UID)]
			if m == nil {
				m = map[string]int32{}
				top[string(p.UID)] = m
			}
			for _, c := range p.Status.ContainerStatuses {
				m[c.Name] = max(m[c.Name], c.RestartCount)
				if x := c.LastTerminationState.Terminated; x != nil && c.RestartCount > 0 {
					ended[fmt.Sprintf("%s/%s#%d", p.Name, c.Name, c.RestartCount)] = fmt.Sprintf("%s exit %d at %s %s",
						x.Reason, x.ExitCode, x.FinishedAt.UTC().Format("15:04:05"), strings.TrimSpace(x.Message))
				}
			}
		}
	}
	out := map[string]int32{}
	for _, m := range top {
		for c, n := range m {
			out[c] += n
		}
	}
	var how []string
	for k, v := range ended {
		how = append(how, k+": "+v)
	}
	slices.Sort(how)
	return out, how
}

func restartsText(r map[string]int32) string {
	var parts []string
	for c, n := range r {
		parts = append(parts, fmt.Sprintf("%s %d", c, n))
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
