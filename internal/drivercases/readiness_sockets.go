package drivercases

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// socketSample is the driver's socket directory on the node at one moment,
// and the old pod then.
type socketSample struct {
	at          time.Time
	present     map[string]bool
	oldDeleting bool   // the old pod was deleted (its instance got SIGTERM) or gone
	link        string // the handover's endpoint link's target ("" none)
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
	quit chan struct{}
	done chan struct{}

	mu      sync.Mutex
	samples []socketSample
	next    chan struct{} // closed when the next sample is recorded
}

func (x *socketSampler) stop() []socketSample {
	close(x.quit)
	<-x.done
	return x.samples
}

func (x *socketSampler) record(smp socketSample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.samples = append(x.samples, smp)
	close(x.next)
	x.next = make(chan struct{})
}

// awaitListingAfter returns once a listing that started after t is
// recorded (true), or when the sampler stops, ctx ends or limit passes
// (false).
func (x *socketSampler) awaitListingAfter(ctx context.Context, t time.Time, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		x.mu.Lock()
		ok := len(x.samples) > 0 && x.samples[len(x.samples)-1].at.After(t)
		next := x.next
		x.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-next:
		case <-x.done:
			return false
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		}
	}
}

func (s *suite) sampleSockets(ctx context.Context, node, dir string, old *corev1.Pod) *socketSampler {
	x := &socketSampler{quit: make(chan struct{}), done: make(chan struct{}), next: make(chan struct{})}
	go func() {
		defer close(x.done)
		for {
			at := time.Now()
			out, err := s.cl.Node.NodeSh(ctx, node, `find "$1" -mindepth 1 -maxdepth 1 \( -type s -printf '%f\n' -o -type l -name '`+handoverLinkName+`' -printf '->%l\n' \)`, dir)
			if err == nil {
				smp := socketSample{at: at, present: map[string]bool{}}
				for _, f := range strings.Fields(out) {
					if t, ok := strings.CutPrefix(f, "->"); ok {
						smp.link = t
						continue
					}
					smp.present[f] = true
				}
				p, gerr := s.cl.Client.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
				smp.oldDeleting = apierrors.IsNotFound(gerr) || gerr == nil && (p.UID != old.UID || p.DeletionTimestamp != nil)
				if gerr == nil || apierrors.IsNotFound(gerr) { // else the pod's state is unknown: no sample
					x.record(smp)
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
	return append(out, judgeLink(r)...)
}

// judgeLink says what R2's samples show of the handover's endpoint link
// (none when no sample saw one: not the handover): the kubelet dials it for
// every call, so it must stay, name one instance's own socket and, after
// the rollout, the new instance's.
func judgeLink(r *socketRecord) []string {
	var out []string
	linked, newSeen := false, false
	for _, smp := range r.samples {
		newSeen = newSeen || smp.present[r.new]
		switch {
		case smp.link != "":
			linked = true
		case linked:
			who := "something other than the registrars"
			if newSeen {
				who = "probably the new instance's driver (its socket " + r.new + " was there)"
			}
			out = append(out, fmt.Sprintf("the endpoint link %s disappeared at +%.1f s: %s removed it, and every call of the kubelet fails until a registrar puts it back (the kubelet dials it, not the instances' sockets). Fix: remove only your own socket (the path of your --endpoint), never the directory's other files. See %s",
				handoverLinkName, smp.at.Sub(r.t0).Seconds(), who, ReadinessDoc))
			return out
		}
		if smp.link != "" && smp.link != r.old && smp.link != r.new {
			out = append(out, fmt.Sprintf("the endpoint link %s pointed at %s at +%.1f s, neither instance's own socket (%s, %s): the handover moves it between per-pod sockets. Fix: a socket per pod (/csi/$(POD_UID).sock). See %s",
				handoverLinkName, smp.link, smp.at.Sub(r.t0).Seconds(), r.old, r.new, ReadinessDoc))
			return out
		}
	}
	if last := r.samples[len(r.samples)-1]; linked && last.link != r.new {
		out = append(out, fmt.Sprintf("after the rollout the endpoint link %s points at %q, not at the new instance's socket %s: the kubelet's calls reach no running driver. See %s", handoverLinkName, last.link, r.new, ReadinessDoc))
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
// one's is gone once its pod is. With the handover, the endpoint link
// stays, names one instance's own socket and, at the end, the new one's.
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
	if l := linkTargets(r.samples); l != "" {
		t.Logf("the endpoint link %s (the handover) pointed at: %s", handoverLinkName, l)
	}
	for _, p := range judgeSockets(r) {
		s.socketThief = s.socketThief || strings.Contains(p, "not its own")
		t.Errorf("%s", p)
	}
}

// linkTargets lists the link's targets in the order seen, each once in a
// row ("" when no sample saw a link).
func linkTargets(samples []socketSample) string {
	var l []string
	for _, smp := range samples {
		t := smp.link
		if t == "" {
			t = "(none)"
		}
		if len(l) == 0 || l[len(l)-1] != t {
			l = append(l, t)
		}
	}
	if len(l) == 1 && l[0] == "(none)" || len(l) == 0 {
		return ""
	}
	return strings.Join(l, " -> ")
}
