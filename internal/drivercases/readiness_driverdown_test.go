package drivercases

import (
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
)

func TestNewerDriverFailsRunsOnlyWhenChosen(t *testing.T) {
	if err := CheckCases([]string{CaseNewerDriverFails}); err != nil {
		t.Errorf("R5 chosen: %v", err)
	}
	mode := &driverUnderTest{spec: &driverspec.Spec{RollingUpdate: "container registrar: --rolling-update"}}
	unchosen := &suite{d: mode}
	if !unchosen.chosen(CaseVolumesAcross) || unchosen.chosen(CaseNewerDriverFails) {
		t.Error("with the mode and none chosen, R1-R4 run and R5 does not")
	}
	only := &suite{d: mode, opt: Options{Cases: []string{CaseNewerDriverFails}}}
	if only.chosen(CaseVolumesAcross) || only.chosen(CaseRollout) || !only.chosen(CaseNewerDriverFails) {
		t.Error("with R5 chosen, only R5 runs")
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
