package drivercases

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
)

// span is a time when the driver was not registered on a node.
type span struct {
	from, to time.Time
	open     bool // still unregistered at the end of the window
}

func (s span) String() string {
	if s.open {
		return fmt.Sprintf("from %s, not back", s.from.Format("15:04:05.000"))
	}
	return fmt.Sprintf("%s for %.3f s", s.from.Format("15:04:05.000"), s.to.Sub(s.from).Seconds())
}

// keyOf: the node's annotation csi.volume.kubernetes.io/nodeid has a key
// for driver (whatever its node ID).
func keyOf(node, driver string) func(record.State) bool {
	return annotatedWith(node, driver, true, func(string) bool { return true })
}

// awaitRegistered waits up to wait until node's CSINode entry and
// annotation key for driver are there (again), as the recorders saw them
// last; each error says which did not come back.
func awaitRegistered(ctx context.Context, node, driver string, nodeRec, cnRec *record.Recorder, wait time.Duration) (errCN, errKey error) {
	_, _, errCN = cnRec.Await(ctx, cnRec.Len()-1, wait, "CSINode entry", entryOf(node, driver))
	_, _, errKey = nodeRec.Await(ctx, nodeRec.Len()-1, wait, "annotation key", keyOf(node, driver))
	return errCN, errKey
}

// registrationAbsences returns the spans within [from, to] when node's
// CSINode entry (cn) and annotation key (key) for driver were absent, and
// their union: the driver unregistered on the node.
func registrationAbsences(node, driver string, nodeRec, cnRec *record.Recorder, from, to time.Time) (cn, key, all []span) {
	cn = absences(cnRec.Events(0), entryOf(node, driver), from, to)
	key = absences(nodeRec.Events(0), keyOf(node, driver), from, to)
	return cn, key, unionSpans(cn, key)
}

// absences returns the spans within [from, to] when present was false,
// from a recorder's events: the state after an event holds until the next
// event (the last one until to); the events before from give the state at
// from. A span still open at to ends there, marked open.
func absences(evs []record.Event, present func(record.State) bool, from, to time.Time) []span {
	var out []span
	var cur *span
	for i, ev := range evs {
		start := ev.At
		if start.After(to) {
			break
		}
		end := to
		if i+1 < len(evs) && evs[i+1].At.Before(to) {
			end = evs[i+1].At
		}
		if end.Before(from) {
			continue // replaced by a later state before the window
		}
		if start.Before(from) {
			start = from
		}
		if present(ev.State) {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, span{from: start})
			cur = &out[len(out)-1]
		}
		cur.to = end
	}
	if cur != nil && !cur.to.Before(to) {
		cur.open = true
	}
	return out
}

// unionSpans merges spans that overlap or touch: the driver is
// unregistered when either its CSINode entry or its annotation key is
// absent.
func unionSpans(sets ...[]span) []span {
	var all []span
	for _, s := range sets {
		all = append(all, s...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].from.Before(all[j].from) })
	var out []span
	for _, s := range all {
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			if s.to.After(out[n-1].to) {
				out[n-1].to = s.to
			}
			out[n-1].open = out[n-1].open || s.open
			continue
		}
		out = append(out, s)
	}
	return out
}

// totalOf sums the spans' durations.
func totalOf(spans []span) time.Duration {
	var d time.Duration
	for _, s := range spans {
		d += s.to.Sub(s.from)
	}
	return d
}

// NodeRollout is what the rollout case measured on one node.
type NodeRollout struct {
	Node string
	// Unregistered is how long the driver was unregistered on the node
	// (its CSINode entry or its Node annotation key absent), in seconds,
	// from the rollout's start to the end of the window; Gaps the number of
	// such spans; NotBack: still unregistered at the end.
	Unregistered float64
	Gaps         int
	NotBack      bool
	// Moved: the workload's pod left this node in the rollout (a
	// Deployment's new pod landed elsewhere): its registration here ends.
	Moved bool
	// The inline-volume pods started on the node during the rollout:
	// FailedMount events of theirs (the kubelet's retries counted) and those
	// that never ran.
	Started, FailedMounts, NeverRan int
	// WatchBroke: a recorder's watch ended in the window, so a gap may
	// have been missed.
	WatchBroke string
}

// rolloutJudgement holds what the verdict of the rollout case rests on.
type rolloutJudgement struct {
	Mode     string // where the manifests turn on the rolling-update mode; "" none
	Workload string // its kind
	MaxSurge string // as written
	Mounts   bool   // inline-volume pods were started
	Nodes    []NodeRollout
}

// Verdicts of the rollout case beyond pass and FAIL.
const verdictMeasured = "measured"

// The verdicts besides pass, FAIL, skip and measured.
const (
	// VerdictNotChecked: verify's own means (its exec on the node, its API
	// connection) failed within the case's bound; nothing is said about
	// the driver.
	VerdictNotChecked = "could not check"
	// VerdictNotJudged: the case cannot judge this driver (no inline
	// volume verify can create, no dialable socket); its note says what
	// verify would need. Never pass.
	VerdictNotJudged = "not judged"
)

// verdict judges the rollout: without the rolling-update mode, or for a
// StatefulSet (which replaces its pod in place), the figures are measured,
// not judged. With the mode, it passes when no node where the workload's pod
// stayed saw the driver unregistered for any time and no inline-volume pod
// failed to mount or never ran. It returns the verdict and why (a FAIL's
// reasons, or what "measured" means).
func (j rolloutJudgement) verdict() (string, []string) {
	switch {
	case j.Mode == "":
		return verdictMeasured, []string{"the manifests do not turn on the rolling-update mode (no --rolling-update): the figures are measured, not judged"}
	case j.Workload == "StatefulSet":
		return verdictMeasured, []string{"a StatefulSet replaces its pod in place: no two pods of the driver overlap on the node, so the mode cannot hand over and a gap is expected; measured, not judged"}
	}
	var why []string
	for _, n := range j.Nodes {
		if n.WatchBroke != "" {
			why = append(why, fmt.Sprintf("node %s: the watch broke (%s): a gap may have been missed", n.Node, n.WatchBroke))
		}
		if !n.Moved && (n.Gaps > 0 || n.NotBack) {
			g := fmt.Sprintf("node %s: the driver was unregistered for %.3f s in %d span(s)", n.Node, n.Unregistered, n.Gaps)
			if n.NotBack {
				g += ", and not registered again at the end"
			}
			why = append(why, g)
		}
		if j.Mounts && n.FailedMounts > 0 {
			why = append(why, fmt.Sprintf("node %s: %d failed mount(s) (FailedMount events)", n.Node, n.FailedMounts))
		}
		if j.Mounts && n.NeverRan > 0 {
			why = append(why, fmt.Sprintf("node %s: %d of %d inline-volume pods never ran", n.Node, n.NeverRan, n.Started))
		}
	}
	if len(why) == 0 {
		return "pass", nil
	}
	if j.Workload == "DaemonSet" && (j.MaxSurge == "0" || j.MaxSurge == "0%") {
		why = append(why, "maxSurge 0 as written: the old pod leaves before the new one starts, so the mode has no successor to hand over to; it needs maxSurge 1 (as manifests/base/daemonset.yaml has)")
	}
	return "FAIL", why
}

// spansText lists spans for a log line.
func spansText(spans []span) string {
	if len(spans) == 0 {
		return "none"
	}
	var out []string
	for _, s := range spans {
		out = append(out, s.String())
	}
	return strings.Join(out, "; ")
}
