package drivercases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Span is a time when the driver was not registered on a node (or one of
// its registration's facts was absent).
type Span struct {
	From, To time.Time
	Open     bool // still unregistered at the end of the window
}

func (s Span) String() string {
	if s.Open {
		return fmt.Sprintf("from %s, not back", s.From.Format("15:04:05.000"))
	}
	return fmt.Sprintf("%s for %.3f s", s.From.Format("15:04:05.000"), s.To.Sub(s.From).Seconds())
}

// keyOf: the node's annotation csi.volume.kubernetes.io/nodeid has a key
// for driver (whatever its node ID).
func keyOf(node, driver string) func(record.State) bool {
	return AnnotatedWith(node, driver, true, func(string) bool { return true })
}

// entryOf: the node's CSINode has an entry for driver.
func entryOf(node, driver string) func(record.State) bool {
	return func(st record.State) bool { return len(CSINodeEntries(st.CSINode(node), driver)) > 0 }
}

// awaitRegistered waits up to wait until node's CSINode entry and
// annotation key for driver are there (again), as the recorders saw them
// last; each error says which did not come back.
func awaitRegistered(ctx context.Context, node, driver string, nodeRec, cnRec *record.Recorder, wait time.Duration) (errCN, errKey error) {
	_, _, errCN = cnRec.Await(ctx, cnRec.Len()-1, wait, "CSINode entry", entryOf(node, driver))
	_, _, errKey = nodeRec.Await(ctx, nodeRec.Len()-1, wait, "annotation key", keyOf(node, driver))
	return errCN, errKey
}

// RegistrationGaps is what the recorders of a node's Node and CSINode saw
// of a driver's registration in a window.
type RegistrationGaps struct {
	// CSINode and Annotation: the spans when the CSINode entry, the
	// annotation key, was absent.
	CSINode, Annotation []Span
	// Unregistered: the spans when the registration was not Registered
	// (csiplugin's rule, on the Node and CSINode as recorded last at each
	// event of either).
	Unregistered []Span
}

// MeasureGaps measures the registration of driver on node within [from,
// to] from the events of the Node's recorder and the CSINode's (a zero from:
// from the first event on; events before from give the state at from).
func MeasureGaps(node, driver string, nodeEvs, cnEvs []record.Event, from, to time.Time) RegistrationGaps {
	return RegistrationGaps{
		CSINode:      absences(points(cnEvs, entryOf(node, driver)), from, to),
		Annotation:   absences(points(nodeEvs, keyOf(node, driver)), from, to),
		Unregistered: absences(registeredPoints(node, driver, nodeEvs, cnEvs), from, to),
	}
}

// registrationAbsences returns the spans within [from, to] when node's
// CSINode entry (cn) and annotation key (key) for driver were absent, and
// those when the driver was not registered (all).
func registrationAbsences(node, driver string, nodeRec, cnRec *record.Recorder, from, to time.Time) (cn, key, all []Span) {
	g := MeasureGaps(node, driver, nodeRec.Events(0), cnRec.Events(0), from, to)
	return g.CSINode, g.Annotation, g.Unregistered
}

// point is a state seen at a time: whether what is measured was present.
type point struct {
	At      time.Time
	Present bool
}

func points(evs []record.Event, present func(record.State) bool) []point {
	out := make([]point, 0, len(evs))
	for _, ev := range evs {
		out = append(out, point{ev.At, present(ev.State)})
	}
	return out
}

// registeredPoints merges the two recorders' events in time and judges the
// registration after each with csiplugin's rule: the Node and the CSINode
// as last seen (before a recorder's first event: absent).
func registeredPoints(node, driver string, nodeEvs, cnEvs []record.Event) []point {
	var out []point
	var n *corev1.Node
	var cn *storagev1.CSINode
	i, j := 0, 0
	for i < len(nodeEvs) || j < len(cnEvs) {
		var at time.Time
		if j >= len(cnEvs) || i < len(nodeEvs) && !nodeEvs[i].At.After(cnEvs[j].At) {
			at, n = nodeEvs[i].At, nodeEvs[i].State.Node(node)
			i++
		} else {
			at, cn = cnEvs[j].At, cnEvs[j].State.CSINode(node)
			j++
		}
		r, err := RegistrationOf(n, cn, driver)
		out = append(out, point{at, err == nil && r.Registered()})
	}
	return out
}

// absences returns the spans within [from, to] when the points were not
// present: the state at a point holds until the next point (the last one
// until to); the points before from give the state at from. A span still
// open at to ends there, marked open.
func absences(pts []point, from, to time.Time) []Span {
	var out []Span
	var cur *Span
	for i, pt := range pts {
		start := pt.At
		if start.After(to) {
			break
		}
		end := to
		if i+1 < len(pts) && pts[i+1].At.Before(to) {
			end = pts[i+1].At
		}
		if end.Before(from) {
			continue // replaced by a later state before the window
		}
		if start.Before(from) {
			start = from
		}
		if i+1 < len(pts) && !end.After(start) {
			continue // replaced at once: held for no time (the other recorder's first state, at the window's start)
		}
		if pt.Present {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, Span{From: start})
			cur = &out[len(out)-1]
		}
		cur.To = end
	}
	if cur != nil && !cur.To.Before(to) {
		cur.Open = true
	}
	return out
}

// TotalOf sums the spans' durations.
func TotalOf(spans []Span) time.Duration {
	var d time.Duration
	for _, s := range spans {
		d += s.To.Sub(s.From)
	}
	return d
}

// rolloutJudgement holds what the verdict of the rollout case rests on.
type rolloutJudgement struct {
	Mode     string // where the manifests turn on the rolling-update mode; "" none
	Workload string // its kind
	MaxSurge string // as written
	Mounts   bool   // inline-volume pods were started
	Nodes    []report.NodeRollout
}

// verdict judges the rollout: without the rolling-update mode, or for a
// StatefulSet (which replaces its pod in place), the figures are measured,
// not judged. With the mode, it passes when no node where the workload's pod
// stayed saw the driver unregistered for any time and no inline-volume pod
// failed to mount or never ran. It returns the verdict and why (a FAIL's
// reasons, or what "measured" means).
func (j rolloutJudgement) verdict() (string, []string) {
	switch {
	case j.Mode == "":
		return report.VerdictMeasured, []string{"the manifests do not turn on the rolling-update mode (no --rolling-update): the figures are measured, not judged"}
	case j.Workload == "StatefulSet":
		return report.VerdictMeasured, []string{"a StatefulSet replaces its pod in place: no two pods of the driver overlap on the node, so the mode cannot hand over and a gap is expected; measured, not judged"}
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
func spansText(spans []Span) string {
	if len(spans) == 0 {
		return "none"
	}
	var out []string
	for _, s := range spans {
		out = append(out, s.String())
	}
	return strings.Join(out, "; ")
}
