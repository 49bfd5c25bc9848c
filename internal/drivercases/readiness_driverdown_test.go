package drivercases

import (
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
)

func TestNewerDriverFailsRunsWithTheReadinessCases(t *testing.T) {
	if err := CheckCases([]string{CaseNewerDriverFails}); err != nil {
		t.Errorf("R5 chosen: %v", err)
	}
	mode := &driverUnderTest{spec: &driverspec.Spec{RollingUpdate: "container registrar: --rolling-update"}}
	if unchosen := (&suite{d: mode}); !unchosen.chosen(CaseVolumesAcross) || !unchosen.chosen(CaseNewerDriverFails) {
		t.Error("with the mode and none chosen, R1-R5 run")
	}
	if plain := (&suite{d: &driverUnderTest{spec: &driverspec.Spec{}}}); plain.chosen(CaseNewerDriverFails) {
		t.Error("without the mode and none chosen, R5 does not run")
	}
	only := &suite{d: mode, opt: Options{Cases: []string{CaseNewerDriverFails}}}
	if only.chosen(CaseVolumesAcross) || only.chosen(CaseRollout) || !only.chosen(CaseNewerDriverFails) {
		t.Error("with R5 chosen, only R5 runs")
	}
}

// judgeNewerDriverFails on what the reference driver does, and on each way
// a driver or its registrar can fall short: one finding each, naming it.
func TestJudgeNewerDriverFails(t *testing.T) {
	kill := time.Date(2026, 11, 27, 2, 30, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return kill.Add(time.Duration(s * float64(time.Second))) }
	good := r5Seen{oldPod: "old", newPod: "new", oldSock: "old.sock", newSock: "new.sock", kill: kill,
		backOld: sec(3.2), started: sec(4), backNew: sec(15.5), oldGone: sec(21),
		oldRegisters: 1, newRegisters: 1}
	if f := judgeNewerDriverFails(good); len(f) != 0 {
		t.Errorf("the reference driver's run: %q, want no finding", f)
	}
	for _, c := range []struct {
		what   string
		change func(*r5Seen)
		want   string
	}{
		{"no take-back", func(s *r5Seen) { s.backOld, s.backNew, s.oldRegisters, s.newRegisters = time.Time{}, time.Time{}, 0, 0 },
			"did not register the old pod old's endpoint old.sock again"},
		{"the old pod deleted while standing by (not Ready)", func(s *r5Seen) {
			s.backOld, s.backNew, s.oldGone, s.early, s.oldRegisters, s.newRegisters = time.Time{}, time.Time{}, sec(1), true, 0, 0
		}, "the old pod was not Ready beside the new one"},
		{"the old pod deleted while it held the registration", func(s *r5Seen) { s.oldGone, s.early, s.backNew, s.newRegisters = sec(8), true, time.Time{}, 0 },
			"the old pod was not Ready while it held the registration"},
		{"the new instance never back (the old pod deleted once restored)", func(s *r5Seen) { s.backNew, s.newRegisters = time.Time{}, 0 },
			"did not register the new pod's endpoint new.sock again"},
		{"the new instance back before the stable window", func(s *r5Seen) { s.backNew = sec(6) },
			"2.0 s after its driver restarted, before the stable window"},
		{"ping-pong of the new endpoint", func(s *r5Seen) { s.newRegisters = 2 },
			"registered the new pod's endpoint 2 times"},
		{"ping-pong of the old endpoint", func(s *r5Seen) { s.oldRegisters = 2 },
			"registered the old pod's endpoint 2 times"},
		{"unregistered", func(s *r5Seen) { s.deregistered = []string{"DeRegisterPlugin request for plugin x"} },
			"the kubelet unregistered the driver"},
	} {
		s := good
		c.change(&s)
		f := judgeNewerDriverFails(s)
		if len(f) != 1 || !strings.Contains(f[0], c.want) {
			t.Errorf("%s: findings %q, want one containing %q", c.what, f, c.want)
		}
	}
}

func TestRegistersBetweenCountsTheEndpointsRegistrations(t *testing.T) {
	const drv = "registrar.csi.example.com"
	at := func(s string) time.Time {
		v, err := time.Parse("15:04:05", s)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 11, 27, v.Hour(), v.Minute(), v.Second(), 0, time.UTC)
	}
	// The kubelet's own lines (csi_plugin.go), as on the local node.
	log := `I1127 02:30:01.000100    1234 csi_plugin.go:120] kubernetes.io/csi: Register new plugin with name: registrar.csi.example.com at endpoint: /var/lib/kubelet/plugins/registrar.csi.example.com/new-uid.sock
I1127 02:30:05.000100    1234 csi_plugin.go:120] kubernetes.io/csi: Register new plugin with name: registrar.csi.example.com at endpoint: /var/lib/kubelet/plugins/registrar.csi.example.com/old-uid.sock
I1127 02:30:06.000100    1234 csi_plugin.go:120] kubernetes.io/csi: Register new plugin with name: other.csi.example.com at endpoint: /var/lib/kubelet/plugins/registrar.csi.example.com/old-uid.sock
I1127 02:30:18.000100    1234 csi_plugin.go:120] kubernetes.io/csi: Register new plugin with name: registrar.csi.example.com at endpoint: /var/lib/kubelet/plugins/registrar.csi.example.com/new-uid.sock
I1127 02:30:30.000100    1234 csi_plugin.go:120] kubernetes.io/csi: Register new plugin with name: registrar.csi.example.com at endpoint: /var/lib/kubelet/plugins/registrar.csi.example.com/new-uid.sock`
	old := "/var/lib/kubelet/plugins/registrar.csi.example.com/old-uid.sock"
	nw := "/var/lib/kubelet/plugins/registrar.csi.example.com/new-uid.sock"
	kill, backOld, gone := at("02:30:02"), at("02:30:05"), at("02:30:25")
	if got := registersBetween(log, drv, old, kill, at("02:31:00")); got != 1 {
		t.Errorf("old endpoint after the kill: %d, want 1 (another driver's line is not counted)", got)
	}
	if got := registersBetween(log, drv, nw, backOld, gone); got != 1 {
		t.Errorf("new endpoint between the take-back and the old pod's deletion: %d, want 1 (the survivor's announcement after it is not counted)", got)
	}
	if got := registersBetween(log, drv, nw, kill.Add(-time.Minute), at("02:31:00")); got != 3 {
		t.Errorf("new endpoint over the whole log: %d, want 3", got)
	}
}

// The window "while the old pod stands" ends when minReadySeconds was
// restored, not at the old pod's deletionTimestamp (a second's resolution,
// which may fall before a registration that preceded the deletion), unless
// the deletion came first.
func TestR5WindowEnd(t *testing.T) {
	base := time.Date(2026, 11, 27, 5, 18, 51, 0, time.UTC)
	held, gone := base.Add(900*time.Millisecond), base // deleted within the second after the restore
	log := "I1127 05:18:51.300000   30782 csi_plugin.go:119] kubernetes.io/csi: Register new plugin with name: d at endpoint: /p/new.sock\n"
	s := r5Seen{newSock: "new.sock", backOld: base.Add(-5 * time.Second), kill: base.Add(-6 * time.Second), held: held, oldGone: gone}
	s.count(log, "d")
	if s.newRegisters != 1 {
		t.Errorf("registrations counted until the restore: %d, want 1", s.newRegisters)
	}
	s.early = true
	s.count(log, "d")
	if s.newRegisters != 0 {
		t.Errorf("old pod deleted before the restore: registrations counted until its deletion: %d, want 0", s.newRegisters)
	}
}
