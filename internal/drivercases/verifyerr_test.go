package drivercases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
)

func TestVerifysOwnErrorIsNotTheDriversFailure(t *testing.T) {
	var b strings.Builder
	c := &check{name: "x", out: &b}
	own := &VerifyError{Err: errors.New("on node vm (pod ns/p): dial tcp 127.0.0.1:6443: i/o timeout")}
	c.run(func(c *check) {
		c.Errorf("%v", fmt.Errorf("wrapped: %w", own))
		c.Fatal(own)
	})
	if c.failed {
		t.Errorf("failed: verify's own error must not fail the driver's case; log %q", b.String())
	}
	if len(c.notChecked) != 2 || !strings.Contains(b.String(), "verify could not check") {
		t.Errorf("notChecked %q, log %q", c.notChecked, b.String())
	}
	c2 := &check{name: "y", out: &b}
	c2.run(func(c *check) { c.Errorf("%v", errors.New("rpc error: code = NotFound desc = volume x")) })
	if !c2.failed || len(c2.notChecked) != 0 {
		t.Errorf("the driver's error: failed %v, notChecked %q", c2.failed, c2.notChecked)
	}
}

func TestLeftoversAndTheirCleanup(t *testing.T) {
	out := "aaaa\t/var/lib/kubelet/pods/aaaa/volumes/kubernetes.io~csi/inline\t1\tcsi-1\n" +
		"bbbb\t/var/lib/kubelet/pods/bbbb/volumes/kubernetes.io~csi/inline\t0\tcsi-2\n" +
		"live\t/var/lib/kubelet/pods/live/volumes/kubernetes.io~csi/inline\t1\tcsi-3\n"
	l := parseLeftovers("n1", out, map[string]bool{"live": true})
	if len(l) != 2 || l[0].PodUID != "aaaa" || !l[0].Mounted || l[1].Mounted || l[1].VolumeHandle != "csi-2" {
		t.Fatalf("parseLeftovers = %+v, want aaaa (mounted) and bbbb (not), not the live pod's", l)
	}
	c := l[0].Cleanup()
	if len(c) != 2 || c[0] != "umount '/var/lib/kubelet/pods/aaaa/volumes/kubernetes.io~csi/inline/mount'" || strings.Contains(c[1], "-r") {
		t.Errorf("cleanup %q: want the unmount first, then no recursive removal", c)
	}
	if c := l[1].Cleanup(); len(c) != 1 {
		t.Errorf("cleanup of an unmounted one %q, want no umount", c)
	}
	txt := report.LeftText([]report.Result{{Driver: "d", Left: l}})
	if !strings.Contains(txt, "left on the node") || !strings.Contains(txt, "umount") {
		t.Errorf("LeftText %q", txt)
	}
	if (report.Result{Cases: []report.CaseResult{{Verdict: "pass"}}, Left: l}).Passed() {
		t.Error("Passed with something left on the node")
	}
	if !(report.Result{Cases: []report.CaseResult{{Verdict: "pass"}}, Left: l}).Failed() {
		t.Error("not Failed with something left on the node")
	}
}

// fakeNode is a fake of the node's shell (the real one is a pod exec):
// answers are played in order, the last one repeated.
type fakeNode struct {
	Node
	answers []func() (string, error)
	calls   int
	log     string
}

func (f *fakeNode) NodeSh(context.Context, string, string, ...string) (string, error) {
	a := f.answers[min(f.calls, len(f.answers)-1)]
	f.calls++
	return a()
}

func (f *fakeNode) KubeletLog(context.Context, string, int) (string, error) { return f.log, nil }

func TestPodDirsGoneRetriesVerifysOwnErrorsAndCountsRight(t *testing.T) {
	since := time.Now().Add(-time.Minute)
	line := func(uid string) string {
		return since.Add(time.Second).Format("E0102 15:04:05.000000") + ` 1 x.go:1] Error: UnmountVolume.TearDown failed for volume "inline" (UniqueName: "kubernetes.io/csi/` + uid + `-inline") pod "` + uid + `" (UID: "` + uid + `") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = NotFound desc = volume of ` + uid + ` does not exist`
	}
	own := func() (string, error) {
		return "", &VerifyError{Err: errors.New("dial tcp 127.0.0.1:6443: i/o timeout")}
	}
	left := func() (string, error) { return "u1\nu2\n", nil }
	f := &fakeNode{answers: []func() (string, error){own, left, own}, log: line("u1") + "\n" + line("u2") + "\n" + line("other")}
	s := &suite{cl: &workloadCluster{Cluster: Cluster{Node: f}}}
	td, err := s.awaitPodDirsGone(context.Background(), map[string][]string{"n1": {"u1", "u2", "u3"}}, 3*time.Second, since)
	if err != nil {
		t.Fatalf("err %v: a complete round was seen, the finding is the driver's", err)
	}
	if len(td.Left) != 2 || td.Of != 3 || len(td.Causes) != 2 {
		t.Fatalf("left %v of %d, causes %v; want 2 of 3 with the driver's answers", td.Left, td.Of, td.Causes)
	}
	txt := td.text("on the new instance")
	if !strings.Contains(txt, "could not tear down 2 of 3 volumes") || !strings.Contains(txt, "2 volume(s): NotFound: volume of u1 does not exist") || strings.Contains(txt, "6443") {
		t.Errorf("text %q", txt)
	}

	f = &fakeNode{answers: []func() (string, error){own}}
	s = &suite{cl: &workloadCluster{Cluster: Cluster{Node: f}}}
	_, err = s.awaitPodDirsGone(context.Background(), map[string][]string{"n1": {"u1"}}, 2*time.Second, since)
	if !VerifysOwn(err) {
		t.Errorf("no round completed: err %v, want verify's own", err)
	}
}
