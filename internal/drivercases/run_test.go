package drivercases

import (
	"strings"
	"testing"
)

func TestCheckCases(t *testing.T) {
	if err := CheckCases(nil); err != nil {
		t.Errorf("no case chosen: %v", err)
	}
	if err := CheckCases([]string{CaseRollout, CaseRolloutsWithFaults}); err != nil {
		t.Errorf("6 and 8: %v", err)
	}
	for _, bad := range []string{CaseDeployed, CaseUninstalled, "6", ""} {
		if err := CheckCases([]string{bad}); err == nil || !strings.Contains(err.Error(), CaseRollout) {
			t.Errorf("%q: %v; want an error listing the cases", bad, err)
		}
	}
	all := &suite{}
	if !all.chosen(CaseRollout) || all.chosen(CaseRolloutsWithFaults) {
		t.Error("with none chosen, 2-6 run and 8 does not")
	}
	only8 := &suite{opt: Options{Cases: []string{CaseRolloutsWithFaults}}}
	if only8.chosen(CaseRollout) || !only8.chosen(CaseRolloutsWithFaults) {
		t.Error("with 8 chosen, only 8 runs")
	}
}
