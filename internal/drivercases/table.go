package drivercases

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/mdtable"
)

// CaseResult is the outcome of one case.
type CaseResult struct {
	Case     string
	Verdict  string // pass, FAIL, skip; measured: figures reported, not judged (the rollout without the mode); VerdictNotChecked, VerdictNotJudged
	Note     string
	Restarts map[string]int32 // container -> restarts during the case, summed over the workload's pods
	Times    []CaseTime
	// Rollout are the rollout case's figures by node; Mounts says whether
	// it started pods with an inline volume (otherwise it measured the
	// registration only).
	Rollout []NodeRollout
	Mounts  bool
	// Findings are the messages of its failures: the causes in the
	// driver's terms, and the fix.
	Findings []string
}

// CaseTime is a time a case measured, from its fault.
type CaseTime struct {
	What    string
	Seconds float64
}

// Result is one run: one driver with one registrar.
type Result struct {
	Driver     string // the manifests, as given
	Registrar  string // the registrar image under test (or "in-process")
	Kubernetes string
	Provider   string
	Cases      []CaseResult
	// Left is what the driver left on the nodes (mounts, volume
	// directories of pods that are gone), found after each case.
	Left []Leftover
}

// Passed reports whether every case passed (a case whose figures are
// measured, or that cannot judge this driver, does not fail) and nothing
// was left on the node.
func (r Result) Passed() bool {
	for _, c := range r.Cases {
		if c.Verdict != "pass" && c.Verdict != verdictMeasured && c.Verdict != VerdictNotJudged {
			return false
		}
	}
	return len(r.Cases) > 0 && len(r.Left) == 0
}

// NotChecked reports whether verify could not check a case (its own
// error, VerdictNotChecked).
func (r Result) NotChecked() bool {
	for _, c := range r.Cases {
		if c.Verdict == VerdictNotChecked {
			return true
		}
	}
	return false
}

// Failed reports whether a case failed on the driver's account or the
// driver left something on the node (not: verify could not check).
func (r Result) Failed() bool {
	for _, c := range r.Cases {
		if c.Verdict == "FAIL" {
			return true
		}
	}
	return len(r.Left) > 0
}

// Table prints runs side by side: driver and case × registrar, each with
// its verdict, the container restarts during the case and the kubelet's
// times (CSINode entry gone / back, from the fault), and for the rollout
// how long the driver was unregistered and how many mounts failed, by node.
func Table(runs []Result) string {
	var regs, rows []string
	cell := map[[2]string]*CaseResult{}
	for i := range runs {
		r := &runs[i]
		if !slices.Contains(regs, r.Registrar) {
			regs = append(regs, r.Registrar)
		}
		for j := range r.Cases {
			row := filepath.Base(r.Driver) + " " + r.Cases[j].Case
			if !slices.Contains(rows, row) {
				rows = append(rows, row)
			}
			cell[[2]string{row, r.Registrar}] = &r.Cases[j]
		}
	}
	tb := mdtable.Table{Header: []string{"driver, case"}}
	for _, reg := range regs {
		tb.Header = append(tb.Header, reg, "restarts", "CSINode entry (s)", "unregistered (s)", "failed mounts")
	}
	var notes []string
	for _, row := range rows {
		cells := []string{row}
		for _, reg := range regs {
			c := cell[[2]string{row, reg}]
			if c == nil {
				cells = append(cells, "-", "-", "-", "-", "-")
				continue
			}
			v := c.Verdict
			if c.Note != "" {
				v += " *"
				notes = append(notes, fmt.Sprintf("%s, %s: %s", row, reg, c.Note))
			}
			var rs []string
			for k, n := range c.Restarts {
				rs = append(rs, fmt.Sprintf("%s %d", k, n))
			}
			sort.Strings(rs)
			if len(rs) == 0 {
				rs = []string{"0"}
			}
			var ts []string
			for _, x := range c.Times {
				if strings.Contains(x.What, "CSINode entry") {
					_, w, _ := strings.Cut(x.What, "-> ")
					w = strings.TrimPrefix(w, "CSINode entry ")
					ts = append(ts, fmt.Sprintf("%s %.2f", w, x.Seconds))
				}
			}
			if len(ts) == 0 {
				ts = []string{"-"}
			}
			unreg, mounts := rolloutCells(c)
			cells = append(cells, v, strings.Join(rs, ", "), strings.Join(ts, "; "), unreg, mounts)
		}
		tb.Rows = append(tb.Rows, cells)
	}
	var b strings.Builder
	b.WriteString(tb.Markdown())
	for _, r := range runs {
		fmt.Fprintf(&b, "%s with %s: Kubernetes %s, provider %s\n", filepath.Base(r.Driver), r.Registrar, r.Kubernetes, r.Provider)
	}
	for _, n := range notes {
		b.WriteString("* " + n + "\n")
	}
	return b.String()
}

// rolloutCells are the rollout case's cells: the seconds unregistered and
// the failed mounts by node (the node named when there are several); "-"
// for the other cases.
func rolloutCells(c *CaseResult) (unreg, mounts string) {
	if len(c.Rollout) == 0 {
		return "-", "-"
	}
	var u, m []string
	for _, n := range c.Rollout {
		name := ""
		if len(c.Rollout) > 1 {
			name = n.Node + " "
		}
		x := fmt.Sprintf("%s%.2f", name, n.Unregistered)
		switch {
		case n.Moved:
			x += " (pod left)"
		case n.NotBack:
			x += " (not back)"
		}
		u = append(u, x)
		y := fmt.Sprintf("%s%d", name, n.FailedMounts)
		if n.NeverRan > 0 {
			y += fmt.Sprintf(" (%d never ran)", n.NeverRan)
		}
		m = append(m, y)
	}
	if !c.Mounts {
		m = []string{"not measured"}
	}
	return strings.Join(u, "; "), strings.Join(m, "; ")
}
