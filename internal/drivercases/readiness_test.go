package drivercases

import (
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
)

func samples(t0 time.Time, rows ...string) []socketSample {
	// Each row: "<present sockets, comma-separated>|<old deleting: y/n>".
	var out []socketSample
	for i, r := range rows {
		socks, del, _ := strings.Cut(r, "|")
		s := socketSample{at: t0.Add(time.Duration(i) * 300 * time.Millisecond), present: map[string]bool{}, oldDeleting: del == "y"}
		for _, x := range strings.Split(socks, ",") {
			if x != "" {
				s.present[x] = true
			}
		}
		out = append(out, s)
	}
	return out
}

func TestJudgeSockets(t *testing.T) {
	t0 := time.Now()
	good := &socketRecord{old: "a.sock", new: "b.sock", t0: t0, samples: samples(t0, "a.sock|n", "a.sock,b.sock|n", "a.sock,b.sock|y", "b.sock|y")}
	if p := judgeSockets(good); len(p) != 0 {
		t.Errorf("good: %q", p)
	}
	removed := &socketRecord{old: "a.sock", new: "b.sock", t0: t0, samples: samples(t0, "a.sock|n", "b.sock|n", "b.sock|y")}
	if p := judgeSockets(removed); len(p) != 1 || !strings.Contains(p[0], "the new instance (its socket b.sock was there) removed a socket that is not its own") {
		t.Errorf("removed by the new one: %q", p)
	}
	left := &socketRecord{old: "a.sock", new: "b.sock", t0: t0, samples: samples(t0, "a.sock|n", "a.sock,b.sock|y", "a.sock,b.sock|y")}
	if p := judgeSockets(left); len(p) != 1 || !strings.Contains(p[0], "still there after its pod is gone") {
		t.Errorf("left behind: %q", p)
	}
}

func TestAcrossTextNamesTheCauseAndTheFix(t *testing.T) {
	td := teardown{Left: []string{"n/u1", "n/u2", "n/u3"}, Of: 3, Within: shortWait, Causes: []kubeletlog.VolumeError{
		{PodUID: "u1", Code: "NotFound", Desc: "volume id csi-1 does not exist in the volumes list"},
		{PodUID: "u2", Code: "NotFound", Desc: "volume id csi-2 does not exist in the volumes list"},
		{PodUID: "u3", Code: "NotFound", Desc: "volume id csi-3 does not exist in the volumes list"},
	}}
	got := acrossText(td)
	for _, want := range []string{"NodeUnpublishVolume on the new instance returned NotFound for 3 of 3 volumes the old instance published", "the driver keeps its volumes per instance; both instances must read and write the same node state", ReadinessDoc} {
		if !strings.Contains(got, want) {
			t.Errorf("%q\nwant it to say %q", got, want)
		}
	}
	if got := acrossText(teardown{Left: []string{"n/u1"}, Of: 3, Within: shortWait}); !strings.Contains(got, "did not tear down 1 of 3") || !strings.Contains(got, "names no NodeUnpublishVolume error") {
		t.Errorf("no cause in the log: %q", got)
	}
}

func TestExpectations(t *testing.T) {
	exp, err := ParseExpectations(`# comment
notready/memvolumes R2_volumes_across_instances FAIL returned NotFound
notready/memvolumes left_on_the_node 3
notready/hostport R2_volumes_across_instances skip
`)
	if err != nil || len(exp) != 3 {
		t.Fatalf("%v %v", exp, err)
	}
	left := make([]Leftover, 3)
	runs := []Result{
		{Driver: "/x/manifests/examples/notready/memvolumes", Left: left, Cases: []CaseResult{
			{Case: CaseDeployed, Verdict: "pass"},
			{Case: CaseVolumesAcross, Verdict: "FAIL", Findings: []string{"NodeUnpublishVolume on the new instance returned NotFound for 3 of 3 volumes"}},
		}},
		{Driver: "/x/manifests/examples/notready/hostport", Cases: []CaseResult{{Case: CaseVolumesAcross, Verdict: "skip"}}},
	}
	if bad := CheckExpectations(runs, exp); len(bad) != 0 {
		t.Errorf("as expected, yet %q", bad)
	}
	runs[0].Cases[0].Verdict = "FAIL"
	runs[0].Cases[1].Findings = []string{"something else"}
	runs[0].Left = left[:1]
	bad := CheckExpectations(runs, exp)
	if len(bad) != 3 {
		t.Errorf("want 3 differences (case 1 failed, another cause, 1 left not 3), got %q", bad)
	}
	if _, err := ParseExpectations("d 9_nothing FAIL"); err == nil || !strings.Contains(err.Error(), "9_nothing") {
		t.Errorf("unknown case: %v", err)
	}
	if txt := ReadinessText(runs); !strings.Contains(txt, "hostport R2_volumes_across_instances: skip") {
		t.Errorf("ReadinessText %q", txt)
	}
}
