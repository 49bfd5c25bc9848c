package drivercases

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/kubeletlog"
	corev1 "k8s.io/api/core/v1"
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

func notFound(uids ...string) []kubeletlog.VolumeError {
	var out []kubeletlog.VolumeError
	for _, u := range uids {
		out = append(out, kubeletlog.VolumeError{PodUID: u, Code: "NotFound", Desc: "volume id csi-" + u + " does not exist in the volumes list"})
	}
	return out
}

// wantSays fails t for each of wants that text, what it is, does not say.
func wantSays(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s: %q\nwant it to say %q", what, text, want)
		}
	}
}

func TestAcrossTextNamesTheCauseAndTheFix(t *testing.T) {
	g := acrossGroups{before: []string{"b1", "b2", "b3"}, during: []string{"d1", "d2", "d3"}}
	every := teardown{Left: []string{"n/b1", "n/b2", "n/b3", "n/d1", "n/d2", "n/d3"}, Of: 6, Within: shortWait, Causes: notFound("b1", "b2", "b3", "d1", "d2", "d3")}
	got := acrossText(every, g)
	wantSays(t, "volumes in memory", got,
		"NodeUnpublishVolume on the new instance returned NotFound for 6 of 6 volumes the old instance published (3 of 3 published before the new instance started, 3 of 3 while both instances ran)",
		"6 volume(s): NotFound: volume id csi-",
		"the driver keeps its volumes per instance; both instances must read and write the same node state",
		ReadinessDoc)
	// Known when it started, unknown when published during the overlap:
	// the driver reads the node's state once at start.
	overlap := teardown{Left: []string{"n/d1", "n/d2", "n/d3"}, Of: 6, Within: shortWait, Causes: notFound("d1", "d2", "d3")}
	got = acrossText(overlap, g)
	wantSays(t, "state read at start", got,
		"NodeUnpublishVolume on the new instance returned NotFound for 3 of 6 volumes the old instance published (0 of 3 published before the new instance started, 3 of 3 while both instances ran)",
		"it reads the node's state once at start",
		"read it on each call, not once at start",
		ReadinessDoc)
	if strings.Contains(got, "keeps its volumes per instance") {
		t.Errorf("state read at start, named as volumes per instance: %q", got)
	}
	if got := acrossText(teardown{Left: []string{"n/u1"}, Of: 3, Within: shortWait}, acrossGroups{before: []string{"u1", "u2", "u3"}}); !strings.Contains(got, "did not tear down 1 of 3 volumes the old instance published within") || !strings.Contains(got, "names no NodeUnpublishVolume error") || strings.Contains(got, "while both") {
		t.Errorf("no cause in the log, no overlap volumes: %q", got)
	}
}

func TestHoldRegistrar(t *testing.T) {
	ten := int64(10)
	tpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &ten, Containers: []corev1.Container{{Name: "registrar"}, {Name: "driver"}, {Name: "liveness"}}}}
	if why := holdRegistrar(&tpl, "registrar", 20*time.Second); why != "" {
		t.Fatal(why)
	}
	var names []string
	for _, c := range tpl.Spec.Containers {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "driver,liveness,registrar" {
		t.Errorf("containers %v: want the registrar last", names)
	}
	if h := tpl.Spec.Containers[1].Lifecycle; h == nil || h.PostStart == nil || h.PostStart.Sleep == nil || h.PostStart.Sleep.Seconds != 20 {
		t.Errorf("the container before the registrar: lifecycle %+v, want a postStart sleep of 20 s", h)
	}
	if g := *tpl.Spec.TerminationGracePeriodSeconds; g != 20 {
		t.Errorf("grace period %d: the API wants it at least the sleep", g)
	}
	for name, c := range map[string][]corev1.Container{
		"":          {{Name: "driver"}},
		"registrar": {{Name: "registrar"}},
		"missing":   {{Name: "registrar"}, {Name: "driver"}},
	} {
		tp := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: c}}
		if why := holdRegistrar(&tp, name, time.Second); why == "" {
			t.Errorf("registrar %q in %v: held, want why not", name, c)
		}
	}
	own := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "driver", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{}}}}, {Name: "registrar"}}}}
	if why := holdRegistrar(&own, "registrar", time.Second); !strings.Contains(why, "postStart hook of its own") {
		t.Errorf("a postStart of its own: %q", why)
	}
}

func TestExpectations(t *testing.T) {
	exp, err := ParseExpectations(`# comment
notready/memvolumes R2_volumes_across_instances FAIL returned NotFound
notready/memvolumes R2_volumes_across_instances FAIL 3 of 3 volumes
notready/memvolumes left_on_the_node 3
notready/hostport R2_volumes_across_instances skip
`)
	if err != nil || len(exp) != 4 {
		t.Fatalf("%v %v", exp, err)
	}
	left := make([]report.Leftover, 3)
	runs := []report.Result{
		{Driver: "/x/manifests/examples/notready/memvolumes", Left: left, Cases: []report.CaseResult{
			{Case: CaseDeployed, Verdict: "pass"},
			{Case: CaseVolumesAcross, Verdict: "FAIL", Findings: []string{"NodeUnpublishVolume on the new instance returned NotFound for 3 of 3 volumes"}},
		}},
		{Driver: "/x/manifests/examples/notready/hostport", Cases: []report.CaseResult{{Case: CaseVolumesAcross, Verdict: "skip"}}},
	}
	if bad := report.CheckExpectations(runs, exp); len(bad) != 0 {
		t.Errorf("as expected, yet %q", bad)
	}
	runs[0].Cases[0].Verdict = "FAIL"
	runs[0].Cases[1].Findings = []string{"something else"}
	runs[0].Left = left[:1]
	bad := report.CheckExpectations(runs, exp)
	if len(bad) != 4 {
		t.Errorf("want 4 differences (case 1 failed, another cause against each of the two lines of R2, 1 left not 3), got %q", bad)
	}
	if _, err := ParseExpectations("d 9_nothing FAIL"); err == nil || !strings.Contains(err.Error(), "9_nothing") {
		t.Errorf("unknown case: %v", err)
	}
	if txt := ReadinessText(runs); !strings.Contains(txt, "hostport R2_volumes_across_instances: skip") {
		t.Errorf("ReadinessText %q", txt)
	}
}

func TestReverseCleanupScriptRemovesUpToThePodDirectoryOnly(t *testing.T) {
	root := t.TempDir()
	pod := root + "/pods/0000-u"
	target := pod + "/volumes/kubernetes.io~csi/reverse/mount"
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root+"/pods/other", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", reverseCleanupScript, "sh", target, pod).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(pod); !os.IsNotExist(err) {
		t.Errorf("the pod directory %s: %v, want it removed", pod, err)
	}
	if _, err := os.Stat(root + "/pods/other"); err != nil {
		t.Errorf("the pods directory's other entries must stay: %v", err)
	}
}
