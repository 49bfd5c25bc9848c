package drivercases

import (
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
)

func TestParseHandoverSeen(t *testing.T) {
	h := parseHandoverSeen("link 1f2e.sock\nrendezvous\nreg\n")
	if !h.on() || h.Link != "1f2e.sock" || !h.Rendezvous {
		t.Errorf("all three: %+v", h)
	}
	if h := parseHandoverSeen("reg\n"); h.on() {
		t.Errorf("no link (the rolling-update mode's announcements, or upstream's layout): %+v, want not the handover", h)
	}
	if h := parseHandoverSeen("link x.sock\n"); h.on() {
		t.Errorf("a link without the plain registration socket: %+v, want not the handover", h)
	}
}

func TestRegSocketWithTheHandover(t *testing.T) {
	d := &driverUnderTest{name: "stub.csi.example.com", spec: &driverspec.Spec{RollingUpdate: "container registrar: --rolling-update"}}
	if !d.isRegSocket("stub.csi.example.com-reg.sock") {
		t.Error("with --rolling-update, the plain <driver>-reg.sock (the handover's) is the driver's registration socket")
	}
	if d.isRegSocket("other.csi.example.com-reg.sock") {
		t.Error("another driver's socket is not the driver's")
	}
}

func TestPointedAt(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ch := []linkChange{{at(0), "old.sock"}, {at(2), "new.sock"}, {at(5), "old.sock"}, {at(9), "new.sock"}}
	for _, c := range []struct {
		target string
		since  float64
		want   float64
		ok     bool
	}{
		{"new.sock", 0, 2, true},
		{"old.sock", 0, 0, true},   // already then
		{"old.sock", 3, 5, true},   // back after the kill
		{"new.sock", 5.5, 9, true}, // forward again
		{"new.sock", 2.5, 2.5, true},
		{"gone.sock", 0, 0, false},
	} {
		got, ok := pointedAt(ch, c.target, at(c.since))
		if ok != c.ok || ok && !got.Equal(at(c.want)) {
			t.Errorf("pointedAt(%s, +%.1f) = %v %v, want +%.1f %v", c.target, c.since, got.Sub(t0), ok, c.want, c.ok)
		}
	}
	if _, ok := pointedAt(nil, "", t0); ok {
		t.Error("no reading: not pointed at anything")
	}
}

// judgeNewerDriverFailsHandover on the reference driver's run, and one
// finding for each way it can fall short.
// linkWatch.await returns at the change that makes the link point at its
// target, and false once the watch ended without it.
func TestLinkWatchAwait(t *testing.T) {
	w := &linkWatch{quit: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	t0 := time.Now()
	w.add(t0, "a.sock")
	go func() {
		w.add(t0.Add(time.Millisecond), "b.sock")
	}()
	if at, ok := w.await(t.Context(), "b.sock", t0, time.Minute); !ok || !at.Equal(t0.Add(time.Millisecond)) {
		t.Errorf("await b.sock = %v, %v; want its change at +1ms", at, ok)
	}
	close(w.done)
	if _, ok := w.await(t.Context(), "c.sock", t0, time.Minute); ok {
		t.Error("await of a target never seen, the watch ended: true")
	}
}

func TestJudgeNewerDriverFailsHandover(t *testing.T) {
	kill := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return kill.Add(time.Duration(s * float64(time.Second))) }
	changes := []linkChange{{sec(-20), "old.sock"}, {sec(-5), "new.sock"}, {sec(1.1), "old.sock"}, {sec(4.5), "new.sock"}}
	good := r5LinkSeen{oldPod: "old", newPod: "new", oldSock: "old.sock", newSock: "new.sock", kill: kill,
		backOld: sec(1.1), started: sec(3), backNew: sec(4.5), oldGone: sec(12), changes: changes}
	if f := judgeNewerDriverFailsHandover(good); len(f) != 0 {
		t.Errorf("the reference driver's run: %q, want no finding", f)
	}
	for _, c := range []struct {
		what string
		edit func(*r5LinkSeen)
		want string
	}{
		{"no fallback", func(s *r5LinkSeen) { s.backOld, s.backNew = time.Time{}, time.Time{} }, "did not point back at the old pod"},
		{"old pod deleted while not Ready", func(s *r5LinkSeen) {
			s.backOld, s.backNew, s.early, s.oldGone = time.Time{}, time.Time{}, true, sec(0.5)
		}, "was not Ready beside the new one"},
		{"old pod deleted while its driver served", func(s *r5LinkSeen) { s.early, s.oldGone = true, sec(2) }, "not Ready while its driver served"},
		{"no way forward", func(s *r5LinkSeen) { s.backNew = time.Time{} }, "did not point at it again"},
		{"the kubelet's round", func(s *r5LinkSeen) {
			s.kubelet = []string{"I1128 13:00:01.000000 1 csi_plugin.go:123] DeRegisterPlugin request for plugin stub.csi.example.com"}
		}, "registered or unregistered the driver"},
		{"a stranger's target", func(s *r5LinkSeen) {
			s.changes = append(s.changes[:3:3], linkChange{sec(3.5), "csi.sock"}, linkChange{sec(4.5), "new.sock"})
		}, "neither pod's driver socket"},
		{"left at the old", func(s *r5LinkSeen) { s.changes = append(s.changes, linkChange{sec(11), "old.sock"}) }, "not at the remaining pod"},
	} {
		s := good
		c.edit(&s)
		f := judgeNewerDriverFailsHandover(s)
		if len(f) != 1 || !strings.Contains(f[0], c.want) {
			t.Errorf("%s: %q, want one finding containing %q", c.what, f, c.want)
		}
	}
}

// linked sets the link target of each sample, in order ("" none).
func linked(s []socketSample, targets ...string) []socketSample {
	for i, t := range targets {
		s[i].link = t
	}
	return s
}

func TestJudgeSocketsWithTheLink(t *testing.T) {
	t0 := time.Now()
	rows := []string{"a.sock|n", "a.sock,b.sock|n", "a.sock,b.sock|y", "b.sock|y"}
	rec := func(targets ...string) *socketRecord {
		return &socketRecord{old: "a.sock", new: "b.sock", t0: t0, samples: linked(samples(t0, rows...), targets...)}
	}
	if p := judgeSockets(rec("a.sock", "a.sock", "b.sock", "b.sock")); len(p) != 0 {
		t.Errorf("the link follows the new instance: %q", p)
	}
	if p := judgeSockets(rec("", "", "", "")); len(p) != 0 {
		t.Errorf("no link (the rolling-update mode's announcements): %q", p)
	}
	for _, c := range []struct {
		what    string
		targets []string
		want    string
	}{
		{"removed", []string{"a.sock", "", "", ""}, "the endpoint link csi-endpoint.sock disappeared at +0.3 s: probably the new instance's driver"},
		{"a shared socket", []string{"a.sock", "csi.sock", "csi.sock", "csi.sock"}, "neither instance's own socket"},
		{"left at the old", []string{"a.sock", "a.sock", "a.sock", "a.sock"}, "not at the new instance's socket b.sock"},
	} {
		if p := judgeSockets(rec(c.targets...)); len(p) != 1 || !strings.Contains(p[0], c.want) {
			t.Errorf("%s: %q, want one finding containing %q", c.what, p, c.want)
		}
	}
}

func TestLinkTargetsAndKills(t *testing.T) {
	t0 := time.Now()
	s := linked(samples(t0, "a.sock|n", "a.sock,b.sock|n", "a.sock,b.sock|y", "b.sock|y"), "a.sock", "a.sock", "b.sock", "b.sock")
	if got := linkTargets(s); got != "a.sock -> b.sock" {
		t.Errorf("linkTargets = %q", got)
	}
	if got := linkTargets(samples(t0, "a.sock|n")); got != "" {
		t.Errorf("no link: %q", got)
	}
	if got := killsText(r5LinkSeen{kills: 1}); got != "" {
		t.Errorf("one kill: %q", got)
	}
	if got := killsText(r5LinkSeen{kills: 3, quick: []float64{0.7, 0.4}}); !strings.Contains(got, " 3 times (it ran again before the fallback after the first 2, at +0.7 s, +0.4 s") {
		t.Errorf("three kills: %q", got)
	}
}
