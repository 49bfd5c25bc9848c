package drivercases

import (
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// evs builds recorder events at t0+offsets (ms), present or not after each.
func evs(t0 time.Time, steps ...any) []record.Event {
	var out []record.Event
	for i := 0; i < len(steps); i += 2 {
		ms, present := steps[i].(int), steps[i+1].(bool)
		st := record.State{}
		if present {
			st["x"] = nil
		}
		out = append(out, record.Event{At: t0.Add(time.Duration(ms) * time.Millisecond), State: st})
	}
	return out
}

func present(st record.State) bool { _, ok := st["x"]; return ok }

func TestAbsences(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for _, c := range []struct {
		name  string
		evs   []record.Event
		want  []Span
		total time.Duration
	}{
		{"registered throughout", evs(t0, -5000, true, 200, true, 900, true), nil, 0},
		{"one gap", evs(t0, -5000, true, 1000, false, 1800, true), []Span{{From: ms(1000), To: ms(1800)}}, 800 * time.Millisecond},
		{"two absent states in a row are one gap", evs(t0, -5000, true, 1000, false, 1200, false, 1500, true),
			[]Span{{From: ms(1000), To: ms(1500)}}, 500 * time.Millisecond},
		{"gap before the window is not counted", evs(t0, -5000, false, -4000, true, 2000, false, 2100, true),
			[]Span{{From: ms(2000), To: ms(2100)}}, 100 * time.Millisecond},
		{"absent at the start: from the start", evs(t0, -5000, false, 300, true), []Span{{From: ms(0), To: ms(300)}}, 300 * time.Millisecond},
		{"not back at the end", evs(t0, -5000, true, 9000, false), []Span{{From: ms(9000), To: ms(10000), Open: true}}, time.Second},
		{"events after the window are ignored", evs(t0, -5000, true, 9500, false, 12000, true),
			[]Span{{From: ms(9500), To: ms(10000), Open: true}}, 500 * time.Millisecond},
	} {
		got := absences(points(c.evs, present), t0, ms(10000))
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if !got[i].From.Equal(c.want[i].From) || !got[i].To.Equal(c.want[i].To) || got[i].Open != c.want[i].Open {
				t.Errorf("%s: span %d = %+v, want %+v", c.name, i, got[i], c.want[i])
			}
		}
		if d := TotalOf(got); d != c.total {
			t.Errorf("%s: total %s, want %s", c.name, d, c.total)
		}
	}
}

// The driver is unregistered while csiplugin's rule does not hold on the
// Node and CSINode as last recorded: while either the CSINode entry or the
// annotation key is absent (overlapping spans count once), and while they
// disagree on the node ID.
func TestMeasureGaps(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	node := func(at int, id string) record.Event {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm", Annotations: map[string]string{}}}
		if id != "" {
			n.Annotations[csiplugin.NodeIDAnnotation] = `{"d.example.com":"` + id + `"}`
		}
		return record.Event{At: ms(at), State: record.State{"vm": n}}
	}
	csinode := func(at int, id string) record.Event {
		cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}
		if id != "" {
			cn.Spec.Drivers = []storagev1.CSINodeDriver{{Name: "d.example.com", NodeID: id}}
		}
		return record.Event{At: ms(at), State: record.State{"vm": cn}}
	}
	nodeEvs := []record.Event{node(-5000, "vm"), node(1500, ""), node(2500, "vm"), node(6000, "other"), node(6300, "vm"), node(8000, "")}
	cnEvs := []record.Event{csinode(-5000, "vm"), csinode(1000, ""), csinode(2000, "vm"), csinode(5000, ""), csinode(5100, "vm")}
	g := MeasureGaps("vm", "d.example.com", nodeEvs, cnEvs, t0, ms(10000))
	// From the later of the two recorders' first events (as the e2e suite
	// measures from positions): the other's state before it is not a gap.
	if late := MeasureGaps("vm", "d.example.com", nodeEvs[1:], cnEvs[1:], ms(1500), ms(1800)); len(late.Unregistered) != 1 || late.Unregistered[0] != (Span{From: ms(1500), To: ms(1800), Open: true}) {
		t.Errorf("window from the later first event: %v, want one span from it", late.Unregistered)
	}
	reg := []record.Event{node(100, "vm")}
	if got := MeasureGaps("vm", "d.example.com", reg, []record.Event{csinode(200, "vm")}, ms(200), ms(300)).Unregistered; len(got) != 0 {
		t.Errorf("registered from the window's start: %v, want no span (not one of no length)", got)
	}
	want := []Span{{From: ms(1000), To: ms(2500)}, {From: ms(5000), To: ms(5100)}, {From: ms(6000), To: ms(6300)}, {From: ms(8000), To: ms(10000), Open: true}}
	if len(g.Unregistered) != len(want) {
		t.Fatalf("unregistered %v, want %v", g.Unregistered, want)
	}
	for i := range want {
		if g.Unregistered[i] != want[i] {
			t.Errorf("span %d = %+v, want %+v", i, g.Unregistered[i], want[i])
		}
	}
	if d := TotalOf(g.Unregistered); d != 3900*time.Millisecond {
		t.Errorf("total %s, want 3.9s", d)
	}
	if len(g.CSINode) != 2 || len(g.Annotation) != 2 {
		t.Errorf("CSINode entry absent %v, annotation key absent %v: want 2 spans each (the node ID's disagreement is neither)", g.CSINode, g.Annotation)
	}
}

func TestRolloutVerdict(t *testing.T) {
	clean := report.NodeRollout{Node: "vm", Started: 40}
	gap := report.NodeRollout{Node: "vm", Unregistered: 1.2, Gaps: 1, Started: 40}
	failed := report.NodeRollout{Node: "vm", Started: 40, FailedMounts: 3, NeverRan: 1}
	for _, c := range []struct {
		name string
		j    rolloutJudgement
		want string
		why  string // in the reasons
	}{
		{"mode, no gap, no failed mount", rolloutJudgement{Mode: "container r: --rolling-update=$(POD_UID)", Workload: "DaemonSet", MaxSurge: "1", Mounts: true, Nodes: []report.NodeRollout{clean}}, "pass", ""},
		{"mode, a gap", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "1", Mounts: true, Nodes: []report.NodeRollout{gap}}, "FAIL", "unregistered for 1.200 s in 1 span"},
		{"mode, maxSurge 0: the hint", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "0", Nodes: []report.NodeRollout{gap}}, "FAIL", "maxSurge 0 as written"},
		{"mode, failed mounts", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "1", Mounts: true, Nodes: []report.NodeRollout{failed}}, "FAIL", "3 failed mount(s)"},
		{"mode, never ran", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "1", Mounts: true, Nodes: []report.NodeRollout{failed}}, "FAIL", "1 of 40 inline-volume pods never ran"},
		{"mode, mounts not measured: registration only", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "1", Nodes: []report.NodeRollout{failed}}, "pass", ""},
		{"mode, not back", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "1", Nodes: []report.NodeRollout{{Node: "vm", Unregistered: 30, Gaps: 1, NotBack: true}}}, "FAIL", "not registered again at the end"},
		{"mode, the watch broke", rolloutJudgement{Mode: "x", Workload: "DaemonSet", MaxSurge: "1", Nodes: []report.NodeRollout{{Node: "vm", WatchBroke: "watch closed"}}}, "FAIL", "a gap may have been missed"},
		{"mode, a Deployment's pod left the node", rolloutJudgement{Mode: "x", Workload: "Deployment", MaxSurge: "25%", Nodes: []report.NodeRollout{{Node: "a", Moved: true, Unregistered: 5, Gaps: 1, NotBack: true}, {Node: "b"}}}, "pass", ""},
		{"no mode: measured, whatever the figures", rolloutJudgement{Workload: "DaemonSet", MaxSurge: "0", Mounts: true, Nodes: []report.NodeRollout{gap, failed}}, report.VerdictMeasured, "no --rolling-update"},
		{"StatefulSet with the mode: measured", rolloutJudgement{Mode: "x", Workload: "StatefulSet", Nodes: []report.NodeRollout{gap}}, report.VerdictMeasured, "in place"},
	} {
		v, why := c.j.verdict()
		if v != c.want {
			t.Errorf("%s: verdict %s (%q), want %s", c.name, v, why, c.want)
		}
		if c.why != "" && !strings.Contains(strings.Join(why, "\n"), c.why) {
			t.Errorf("%s: reasons %q lack %q", c.name, why, c.why)
		}
		if c.want == "pass" && len(why) != 0 {
			t.Errorf("%s: pass with reasons %q", c.name, why)
		}
	}
}
