package proofmap

import (
	"fmt"
	"path/filepath"
	"slices"

	"strings"
)

// Exist returns every proof of the tree: the e2e tests of kind/e2e (tag
// e2e), the tests of kind/pluginmanager (any minor's tag, and the patched
// handler's csi_deregister_by_endpoint), verify's cases and the documented
// e2e* targets.
func (t *Tree) Exist() (map[Kind][]string, error) {
	e2e, err := TestNames(filepath.Join(t.Root, "kind/e2e"), "e2e")
	if err != nil {
		return nil, err
	}
	pm, err := TestNames(filepath.Join(t.Root, "kind/pluginmanager"), "k8s_1_37", "csi_deregister_by_endpoint")
	if err != nil {
		return nil, err
	}
	targets, err := E2ETargets(t.Root)
	if err != nil {
		return nil, err
	}
	return map[Kind][]string{E2E: e2e, PluginManager: pm, Case: VerifyCases(), Target: targets}, nil
}

// Selected returns what each step of .ci/run selects, by step name: its
// tests or cases, and its make target when that is an e2e* target.
func (t *Tree) Selected(steps []Step, exist map[Kind][]string) (map[string][]Proof, error) {
	// The tests a step may select are those its build compiles: the
	// pluginmanager step builds without csi_deregister_by_endpoint.
	pmStock, err := TestNames(filepath.Join(t.Root, "kind/pluginmanager"), "k8s_1_37")
	if err != nil {
		return nil, err
	}
	candidates := map[Kind][]string{E2E: exist[E2E], PluginManager: pmStock, Case: exist[Case]}
	sel := map[string][]Proof{}
	for _, s := range steps {
		r, err := t.Resolve(s.Target, s.Vars)
		if err != nil {
			return nil, fmt.Errorf(".ci/run:%d: step %q: %v", s.Line, s.Name, err)
		}
		var ps []Proof
		if r.Kind != "" {
			names, err := r.Selects(candidates[r.Kind])
			if err != nil {
				return nil, fmt.Errorf(".ci/run:%d: step %q: %v", s.Line, s.Name, err)
			}
			for _, n := range names {
				ps = append(ps, Proof{r.Kind, n})
			}
		}
		if slices.Contains(exist[Target], s.Target) {
			ps = append(ps, Proof{Target, s.Target})
		}
		sel[s.Name] = ps
	}
	return sel, nil
}

// Check returns what is wrong with the map against the tree and the steps
// of .ci/run, one message each, naming the proof and the fix; the rows to
// paste come ready in each message.
func Check(m *Map, steps []Step, exist map[Kind][]string, selected map[string][]Proof) []string {
	var errs []string
	stepNames := map[string]bool{}
	for _, s := range steps {
		stepNames[s.Name] = true
	}
	known := map[Proof]bool{}
	for k, names := range exist {
		for _, n := range names {
			known[Proof{k, n}] = true
		}
	}
	mapped := map[Proof]bool{}
	byStep := map[string]map[Proof]Row{}
	for _, r := range m.Rows {
		at := fmt.Sprintf("%s:%d", m.File, r.Line)
		if !known[r.Proof] {
			errs = append(errs, fmt.Sprintf("%s: %s %q does not exist (renamed or removed?): rename or remove its rows", at, r.Kind, r.Name))
			continue
		}
		mapped[r.Proof] = true
		if r.Step == "" {
			continue
		}
		if !stepNames[r.Step] {
			errs = append(errs, fmt.Sprintf("%s: %s: step %q is not a step of .ci/run (its `run \"NAME\"`): name one of %s, or write %q",
				at, r.Proof, r.Step, quoteAll(steps), NotInCI+" <where it runs and why>"))
			continue
		}
		if byStep[r.Step] == nil {
			byStep[r.Step] = map[Proof]Row{}
		}
		if _, dup := byStep[r.Step][r.Proof]; dup {
			errs = append(errs, fmt.Sprintf("%s: %s is mapped twice to step %q: keep one row", at, r.Proof, r.Step))
		}
		byStep[r.Step][r.Proof] = r
	}
	for _, s := range steps {
		sel := map[Proof]bool{}
		var add []string
		for _, p := range selected[s.Name] {
			sel[p] = true
			if _, ok := byStep[s.Name][p]; !ok {
				add = append(add, RowText(p, s.Name, ExpectPass, ""))
			}
		}
		if len(add) > 0 {
			errs = append(errs, fmt.Sprintf("step %q (.ci/run:%d) runs proofs the map does not give it: add these rows to %s (Expect SKIP, with the reason in Note, for a test that skips itself there):\n%s",
				s.Name, s.Line, m.File, strings.Join(add, "\n")))
		}
		for p, r := range byStep[s.Name] {
			if !sel[p] {
				errs = append(errs, fmt.Sprintf("%s:%d: the map says step %q runs %s, but the step (its target %s, -test.run/-test.skip, PM_RUN, --case) does not select it: move the row to the step that runs it, or %q",
					m.File, r.Line, s.Name, p, s.Target, NotInCI+" <where it runs and why>"))
			}
		}
	}
	inCI := map[Proof]bool{}
	for _, ps := range selected {
		for _, p := range ps {
			inCI[p] = true
		}
	}
	var unmapped []string
	for _, k := range Kinds {
		for _, n := range exist[k] {
			// One a step selects gets its row from that step's message.
			if p := (Proof{k, n}); !mapped[p] && !inCI[p] {
				unmapped = append(unmapped, RowText(p, "", "", ""))
			}
		}
	}
	if len(unmapped) > 0 {
		errs = append(errs, fmt.Sprintf("proofs not in the map: add a row for each to %s (a .ci/run step in backticks and PASS, or where it runs and why):\n%s",
			m.File, strings.Join(unmapped, "\n")))
	}
	return errs
}

func quoteAll(steps []Step) string {
	var q []string
	for _, s := range steps {
		q = append(q, fmt.Sprintf("%q", s.Name))
	}
	return strings.Join(q, ", ")
}
