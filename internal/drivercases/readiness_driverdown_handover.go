package drivercases

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// R5 with the handover: the kubelet keeps one registration and one
// endpoint, the link csi-endpoint.sock, so what must move is the link. The
// workload rolls with minReadySeconds raised (the old pod stays while it is
// Ready); once the link points at the new pod's driver verify kills that
// driver's container. The link must point back at the old pod's driver
// (the fallback) within takeBackWait, and at the new one's again once its
// restarted driver answers; the old pod must stay Ready beside the new one
// while its driver is the link's (the controller deletes an old pod that
// is not Ready); the kubelet must neither register nor unregister the
// driver meanwhile, and it stays registered (Node annotation, CSINode
// entry). Once the new pod is Ready again minReadySeconds is restored, the
// old pod goes and the link stays at the new pod's driver.
func (s *suite) newerDriverFailsHandover(t *check, ctx context.Context, n string, old *corev1.Pod, was map[types.UID]bool, nodeRec, cnRec, podRec *record.Recorder, minReady int32) {
	d := s.d
	seen := r5LinkSeen{oldPod: old.Name, oldSock: path.Base(s.socketFor(old))}
	dir := s.socketDir(old)
	lw := s.watchLink(ctx, n, dir)
	defer lw.stop()
	oldGoing := podGoing(old.UID)

	tRoll := time.Now()
	restoreMinReady := s.holdOldPods(t, ctx, minReady, "newer-driver-fails-"+tRoll.UTC().Format(time.RFC3339Nano))
	nw := s.awaitNewDriverRunning(t, ctx, podRec, n, was)
	seen.newPod, seen.newSock = nw.Name, path.Base(s.socketFor(nw))
	swapped, ok := lw.await(ctx, seen.newSock, tRoll, takeBackWait)
	if !ok {
		t.Fatalf("waiting %s for the endpoint link %s/%s to point at the new pod's driver socket %s (the handover swaps it once that driver answers Probe): seen %s",
			takeBackWait, dir, handoverLinkName, seen.newSock, linkText(lw.Changes(), tRoll))
	}
	t.measure("template change -> the link points at the new pod's driver", swapped.Sub(tRoll))
	t.Logf("the link points at the new pod %s's driver beside the old pod %s: killing its driver container %s", nw.Name, old.Name, d.driver)
	driver := s.killUntilFallback(t, ctx, n, nw, lw, podRec, &seen)
	if !seen.backOld.IsZero() {
		t.measure("newer driver killed -> the link points at the old pod's driver again", seen.backOld.Sub(seen.kill))
		seen.started = s.awaitDriverRestarted(t, ctx, podRec, nw, driver)
		seen.backNew, _ = lw.await(ctx, seen.newSock, seen.backOld, takeBackWait)
	}
	if !seen.backNew.IsZero() {
		t.measure("newer driver restarted -> the link points at the new pod's driver again", seen.backNew.Sub(seen.started))
		await(t, ctx, podRec, 0, podWait, "the new pod Ready again", func(st record.State) bool {
			p := st.Pod(string(nw.UID))
			return p != nil && PodReady(p)
		})
	}
	oldGone := func() time.Time { return deletionAsked(podRec, old.UID) }
	seen.early = !oldGone().IsZero()
	restoreMinReady()
	if oldGone().IsZero() {
		await(t, ctx, podRec, 0, rolloutWait, "the old pod deleted", oldGoing)
	}
	seen.oldGone = oldGone()
	if _, err := s.awaitRolledOut(ctx, was, rolloutWait); err != nil {
		t.Fatal(err)
	}
	seen.end = time.Now()
	seen.changes = lw.stop()
	t.Logf("the endpoint link: %s (times from the kill)", linkText(seen.changes, seen.kill))
	t.Logf("the old pod %s was deleted at %+.1f s after the kill", old.Name, seen.oldGone.Sub(seen.kill).Seconds())
	if log, err := s.cl.Node.KubeletLog(ctx, n, 20000); err != nil {
		t.couldNotCheck("the kubelet's log on %s: %v", n, err)
	} else {
		seen.kubelet = kubeletRounds(log, d.name, tRoll)
	}
	for _, f := range judgeNewerDriverFailsHandover(seen) {
		t.Errorf("%s. See %s", f, ReadinessDoc)
	}
	s.unregisteredSince(t, n, nodeRec, cnRec, seen.firstKill)
}

// r5LinkSeen is what R5 saw with the handover, from the kill of the new
// pod's driver on.
type r5LinkSeen struct {
	oldPod, newPod   string
	oldSock, newSock string       // the instances' driver sockets, as the link names them
	kill             time.Time    // the new pod's driver container killed, the last time
	firstKill        time.Time    // the first kill
	kills            int          // how many times (maxKills at most)
	quick            []float64    // for each kill the driver restarted from before the fallback: when it ran again (s after the kill)
	backOld          time.Time    // the link pointed at the old pod's driver again (zero: not within takeBackWait)
	started          time.Time    // the new pod's driver container ran again
	backNew          time.Time    // the link pointed at the new pod's driver again (zero: not within takeBackWait)
	early            bool         // the old pod's deletion was seen before minReadySeconds was restored
	oldGone          time.Time    // the old pod's deletion was asked
	end              time.Time    // the rollout complete
	changes          []linkChange // the link's targets, each change
	kubelet          []string     // the kubelet's RegisterPlugin and DeRegisterPlugin lines for the driver since the rollout began
}

// kubeletRounds returns the kubelet's lines registering or unregistering
// driver logged at or after since.
func kubeletRounds(log, driver string, since time.Time) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		at, ok := kubeletlog.Time(line, since)
		if !ok || at.Before(since) {
			continue
		}
		if strings.Contains(line, kubeletlog.RegisterLine(driver)) || strings.Contains(line, "DeRegisterPlugin request for plugin "+driver) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// judgeNewerDriverFailsHandover returns R5's findings with the handover,
// each with its cause and fix (none: pass).
func judgeNewerDriverFailsHandover(s r5LinkSeen) []string {
	var f []string
	for _, line := range s.kubelet {
		f = append(f, "the kubelet registered or unregistered the driver during the rollout, which the handover keeps from it (one registration socket passed from pod to pod, one endpoint link): "+line)
	}
	switch {
	case s.backOld.IsZero() && s.early:
		return append(f, fmt.Sprintf("the DaemonSet controller deleted the old pod %s %+.1f s after the new pod %s's driver was killed, before the endpoint link pointed back at the old pod's driver %s: the old pod was not Ready beside the new one (the controller keeps an old pod beside a new one only while it is Ready), so no older driver was left to serve the kubelet's calls. A standing-by registrar whose driver answers Probe must stay Ready",
			s.oldPod, s.oldGone.Sub(s.kill).Seconds(), s.newPod, s.oldSock))
	case s.backOld.IsZero():
		return append(f, fmt.Sprintf("after the new pod %s's driver was killed%s, the endpoint link %s did not point back at the old pod %s's driver %s within %s (seen, from the last kill: %s): the kubelet's calls reach a dead driver while the old pod's could serve them. The older instance moves the link back when the newer driver stops answering the CSI Probe call: let Probe fail (or answer ready=false) when the driver cannot serve",
			s.newPod, killsText(s), handoverLinkName, s.oldPod, s.oldSock, takeBackWait, linkText(s.changes, s.kill)))
	}
	switch {
	case s.early && (s.backNew.IsZero() || s.oldGone.Before(s.backNew)):
		f = append(f, fmt.Sprintf("the DaemonSet controller deleted the old pod %s %+.1f s after the kill, while the link pointed at its driver and before the new pod's driver took it again: the old pod was not Ready while its driver served the kubelet's calls (its readiness must follow its driver's Probe)",
			s.oldPod, s.oldGone.Sub(s.kill).Seconds()))
	case s.backNew.IsZero():
		f = append(f, fmt.Sprintf("the new pod %s's driver restarted at %s, yet the endpoint link did not point at it again within %s (seen: %s): the newest instance takes the link once its driver answers the CSI Probe call ready; a driver whose Probe fails or says not ready while it serves leaves the calls with the older driver until the old pod goes",
			s.newPod, s.started.UTC().Format(time.RFC3339), takeBackWait, linkText(s.changes, s.kill)))
	}
	if len(s.changes) > 0 {
		last := s.changes[len(s.changes)-1]
		if last.Target != s.newSock {
			f = append(f, fmt.Sprintf("after the rollout the endpoint link points at %q, not at the remaining pod %s's driver %s (seen: %s)", last.Target, s.newPod, s.newSock, linkText(s.changes, s.kill)))
		}
	}
	for _, c := range s.changes {
		if c.Target != s.oldSock && c.Target != s.newSock {
			f = append(f, fmt.Sprintf("the endpoint link pointed at %q at %+.1f s, neither pod's driver socket (%s, %s): the kubelet's calls then reach no driver of this rollout (seen: %s)",
				c.Target, c.At.Sub(s.kill).Seconds(), s.oldSock, s.newSock, linkText(s.changes, s.kill)))
			break
		}
	}
	return f
}

// maxKills bounds R5's kills of the new pod's driver: the kubelet restarts
// a container at once the first time, often before the older instance has
// seen its driver stop answering (the link then stays, rightly); the next
// restarts wait the kubelet's back-off (10 s, 20 s), which the fallback
// must cover.
const maxKills = 3

// killUntilFallback kills the new pod's driver container until the link
// points back at the old pod's driver (seen.backOld, after seen.kill, the
// last kill), at most maxKills times: each time the driver restarted
// before the fallback, it kills it again. It returns the container's
// status at the last kill.
func (s *suite) killUntilFallback(t *check, ctx context.Context, n string, nw *corev1.Pod, lw *linkWatch, podRec *record.Recorder, seen *r5LinkSeen) corev1.ContainerStatus {
	d := s.d
	latest := func() corev1.ContainerStatus {
		evs := podRec.Events(max(podRec.Len()-1, 0))
		if len(evs) == 0 {
			return corev1.ContainerStatus{}
		}
		if p := evs[len(evs)-1].State.Pod(string(nw.UID)); p != nil {
			return ContainerStatus(p, d.driver)
		}
		return corev1.ContainerStatus{}
	}
	driver := ContainerStatus(nw, d.driver)
	for kill := 1; ; kill++ {
		seen.kills = kill
		seen.kill = time.Now()
		if seen.firstKill.IsZero() {
			seen.firstKill = seen.kill
		}
		if err := s.cl.Node.KillContainer(ctx, n, ContainerID(driver)); err != nil {
			t.notJudged("verify could not kill the new pod's driver container %s through the node's runtime: %v", d.driver, err)
		}
		var restarted corev1.ContainerStatus
		end := time.Now().Add(takeBackWait)
		for time.Now().Before(end) && ctx.Err() == nil {
			if at, ok := lw.await(ctx, seen.oldSock, seen.kill, 0); ok {
				seen.backOld = at
				return driver
			}
			if c := latest(); c.RestartCount > driver.RestartCount && c.State.Running != nil {
				restarted = c
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if restarted.State.Running == nil || kill == maxKills {
			return driver
		}
		// Serving again before the fallback: the link stayed, rightly.
		up := restarted.State.Running.StartedAt.Sub(seen.kill).Seconds()
		seen.quick = append(seen.quick, up)
		t.Logf("kill %d: the new pod's driver ran again %+.1f s after it (a second's resolution), the link still at it, before the older instance saw it stop answering; killing it again (the kubelet's restart back-off keeps it down longer)", kill, up)
		// The socket answers again only once the restarted driver serves.
		if at, ok := lw.await(ctx, seen.oldSock, seen.kill, time.Second); ok {
			seen.backOld = at
			return driver
		}
		driver = restarted
	}
}

// killsText says how often R5 killed the driver, when more than once.
func killsText(s r5LinkSeen) string {
	if s.kills < 2 {
		return ""
	}
	var up []string
	for _, q := range s.quick {
		up = append(up, fmt.Sprintf("%+.1f s", q))
	}
	return fmt.Sprintf(" %d times (it ran again before the fallback after the first %d, at %s from each kill: the kubelet's restart back-off keeps it down longer each time)", s.kills, len(s.quick), strings.Join(up, ", "))
}
