package report

import (
	"strings"
	"testing"
)

func TestTableSideBySide(t *testing.T) {
	runs := []Result{
		{Driver: "manifests/examples/upstream-style", Registrar: "csi-registrar:dev", Kubernetes: "v1.37.2", Provider: "local",
			Cases: []CaseResult{
				{Case: "1_deployed", Verdict: "pass", Times: []CaseTime{{"kubectl apply -> CSINode entry on vm", 2.381}}},
				{Case: "4_registration_socket_removed", Verdict: "pass", Restarts: map[string]int32{}, Times: []CaseTime{
					{"socket removed -> CSINode entry gone", 0.85}, {"socket removed -> CSINode entry back", 1.86}, {"socket removed -> annotation key gone", 0.9}}},
				{Case: "6_rollout", Verdict: "measured", Note: "no mode", Mounts: true, Rollout: []NodeRollout{{Node: "vm", Unregistered: 2.345, Gaps: 1, Started: 40, FailedMounts: 4, NeverRan: 1}}},
			}},
		{Driver: "manifests/examples/upstream-style", Registrar: "upstream:v2", Kubernetes: "v1.37.2", Provider: "local",
			Cases: []CaseResult{
				{Case: "4_registration_socket_removed", Verdict: "FAIL", Restarts: map[string]int32{"stub": 1}, Note: "why"},
				{Case: "6_rollout", Verdict: "measured", Rollout: []NodeRollout{{Node: "a", Unregistered: 1}, {Node: "b", Moved: true, Unregistered: 3, NotBack: true}}},
			}},
	}
	got := Table(runs)
	for _, want := range []string{
		"| driver, case | csi-registrar:dev | restarts | CSINode entry (s) | unregistered (s) | failed mounts | upstream:v2 | restarts | CSINode entry (s) | unregistered (s) | failed mounts |",
		"| upstream-style 1_deployed | pass | 0 | on vm 2.38 | - | - | - | - | - | - | - |",
		"| upstream-style 4_registration_socket_removed | pass | 0 | gone 0.85; back 1.86 | - | - | FAIL * | stub 1 | - | - | - |",
		"| upstream-style 6_rollout | measured * | 0 | - | 2.35 | 4 (1 never ran) | measured | 0 | - | a 1.00; b 3.00 (pod left) | not measured |",
		"upstream-style with upstream:v2: Kubernetes v1.37.2, provider local",
		"* upstream-style 4_registration_socket_removed, upstream:v2: why",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if runs[0].Passed() != true || runs[1].Passed() { // measured is not a failure
		t.Errorf("Passed: %v %v, want true false", runs[0].Passed(), runs[1].Passed())
	}
}
