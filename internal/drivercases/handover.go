package drivercases

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The handover (docs/design.md, "The handover"), recognised by what is on
// the node rather than by a flag: one registration socket at the plain
// path <driver>-reg.sock, whose listening descriptor passes from pod to pod
// over the rendezvous socket in the driver socket's directory, and the
// endpoint GetInfo announces, the relative link csi-endpoint.sock in that
// directory, which names the driver socket of the instance the kubelet's
// calls reach now.
const (
	handoverLinkName       = "csi-endpoint.sock"
	handoverRendezvousName = ".csi-registrar-handover.sock"
)

// handoverSeen is what of the handover is on a node at one moment.
type handoverSeen struct {
	Link       string // the link's target ("" no link)
	Rendezvous bool   // the rendezvous socket is there
	RegSocket  bool   // a socket at the plain path <driver>-reg.sock
}

// on reports whether the node runs the driver with the handover: the link
// and the plain registration socket.
func (h handoverSeen) on() bool { return h.Link != "" && h.RegSocket }

// parseHandoverSeen reads handoverScript's output.
func parseHandoverSeen(out string) handoverSeen {
	var h handoverSeen
	for _, line := range strings.Split(out, "\n") {
		switch k, v, _ := strings.Cut(strings.TrimSpace(line), " "); k {
		case "link":
			h.Link = v
		case "rendezvous":
			h.Rendezvous = true
		case "reg":
			h.RegSocket = true
		}
	}
	return h
}

// handoverScript prints "link <target>", "rendezvous" and "reg" for what
// is there; $1 is the driver socket's directory, $2 the registration
// socket's path.
const handoverScript = `t=$(readlink "$1/` + handoverLinkName + `") && echo "link $t"; [ -S "$1/` + handoverRendezvousName + `" ] && echo rendezvous; [ -S "$2" ] && echo reg; true`

// socketDir is the directory of the driver's sockets on the node, where the
// handover keeps its link and rendezvous: that of
// --kubelet-registration-path, else of the socket's hostPath.
func (s *suite) socketDir(pod *corev1.Pod) string {
	return path.Dir(s.socketFor(pod))
}

// handoverOn reads what of the handover is on node; pod is any pod of the
// workload there (the directory's path may name a value of the pod's only
// in its base name).
func (s *suite) handoverOn(ctx context.Context, node string, pod *corev1.Pod) (handoverSeen, error) {
	out, err := s.cl.Node.NodeSh(ctx, node, handoverScript, s.socketDir(pod), PluginsRegistry+"/"+s.d.regSocket())
	if err != nil {
		return handoverSeen{}, &VerifyError{Err: fmt.Errorf("read the handover's files on %s: %w", node, err)}
	}
	return parseHandoverSeen(out), nil
}

// linkChange is the endpoint link seen pointing at a new target.
type linkChange struct {
	At     time.Time
	Target string // "" the link was gone
}

// linkWatch reads the endpoint link on a node every 250 ms (the node's
// commands give no stream of its events) and keeps each change of its
// target; its goroutine ends with stop or with ctx.
type linkWatch struct {
	quit chan struct{}
	done chan struct{}

	mu      sync.Mutex
	changes []linkChange
	changed chan struct{} // closed at the next change
}

func (s *suite) watchLink(ctx context.Context, node, dir string) *linkWatch {
	w := &linkWatch{quit: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			at := time.Now()
			if out, err := s.cl.Node.NodeSh(ctx, node, `readlink "$1" || true`, dir+"/"+handoverLinkName); err == nil {
				w.add(at, strings.TrimSpace(out))
			}
			select {
			case <-ctx.Done():
				return
			case <-w.quit:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *linkWatch) add(at time.Time, target string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.changes); n > 0 && w.changes[n-1].Target == target {
		return
	}
	w.changes = append(w.changes, linkChange{At: at, Target: target})
	close(w.changed)
	w.changed = make(chan struct{})
}

// Changes returns the changes seen so far.
func (w *linkWatch) Changes() []linkChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]linkChange(nil), w.changes...)
}

// stop ends the watch (once) and returns what it saw.
func (w *linkWatch) stop() []linkChange {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
	return w.Changes()
}

// await waits until the link points at target (a base name), seen at or
// after since, and returns when it was first seen so; false after timeout
// or once the watch ended. It looks again at each change the watch records.
func (w *linkWatch) await(ctx context.Context, target string, since time.Time, timeout time.Duration) (time.Time, bool) {
	end := time.NewTimer(timeout)
	defer end.Stop()
	for {
		w.mu.Lock()
		at, ok := pointedAt(w.changes, target, since)
		changed := w.changed
		w.mu.Unlock()
		if ok {
			return at, true
		}
		select {
		case <-changed:
		case <-w.done:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		case <-end.C:
			return time.Time{}, false
		}
	}
}

// pointedAt returns when the link pointed at target at or after since:
// since itself when it did already then.
func pointedAt(ch []linkChange, target string, since time.Time) (time.Time, bool) {
	cur := ""
	for _, c := range ch {
		if !c.At.After(since) {
			cur = c.Target // in effect at since
			continue
		}
		if cur == target {
			return since, true
		}
		if c.Target == target {
			return c.At, true
		}
	}
	if cur == target && cur != "" {
		return since, true
	}
	return time.Time{}, false
}

// linkText lists the changes relative to t0, for the log.
func linkText(ch []linkChange, t0 time.Time) string {
	var l []string
	for _, c := range ch {
		t := c.Target
		if t == "" {
			t = "(no link)"
		}
		l = append(l, fmt.Sprintf("%+.1f s %s", c.At.Sub(t0).Seconds(), t))
	}
	if len(l) == 0 {
		return "no reading"
	}
	return strings.Join(l, ", ")
}
