package report

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Expectation is one line of an expectation file: the outcome a case of a
// driver must have (a non-compliant example's own cause).
type Expectation struct {
	Driver  string // the end of the -f path ("notready/memvolumes")
	Case    string // a case name, or LeftOnTheNode
	Verdict string // the verdict; for LeftOnTheNode how many volumes
	Text    string // a text the case's findings or note must contain
	Line    int
}

// LeftOnTheNode is the case name of an expectation on what the driver
// left on the node (Verdict: how many volumes).
const LeftOnTheNode = "left_on_the_node"

// CheckExpectations compares runs with the expectations: each expected
// outcome must be there, and every case not expected must pass (or be
// measured or not judged) with nothing left on the node. It returns what
// differs (nothing: the runs are as expected).
func CheckExpectations(runs []Result, exp []Expectation) []string {
	var bad []string
	used := make([]bool, len(exp))
	// find returns the expectations of a case of driver (several lines may
	// name one case: each must hold).
	find := func(driver, c string) []int {
		var out []int
		for i, e := range exp {
			if e.Case == c && strings.HasSuffix(filepath.Clean(driver), filepath.Clean(e.Driver)) {
				out = append(out, i)
			}
		}
		return out
	}
	for _, r := range runs {
		for _, c := range r.Cases {
			is := find(r.Driver, c.Case)
			if len(is) == 0 {
				if c.Verdict != "pass" && c.Verdict != VerdictMeasured && c.Verdict != VerdictNotJudged {
					bad = append(bad, fmt.Sprintf("%s %s: %s, not expected (%s)", r.Driver, c.Case, c.Verdict, strings.Join(append(c.Findings, c.Note), "; ")))
				}
				continue
			}
			said := strings.Join(append(append([]string(nil), c.Findings...), c.Note), "\n")
			for _, i := range is {
				used[i] = true
				e := exp[i]
				switch {
				case c.Verdict != e.Verdict:
					bad = append(bad, fmt.Sprintf("%s %s: %s, expected %s (line %d): %s", r.Driver, c.Case, c.Verdict, e.Verdict, e.Line, said))
				case !strings.Contains(said, e.Text):
					bad = append(bad, fmt.Sprintf("%s %s: %s as expected, but its findings do not say %q (line %d): %s", r.Driver, c.Case, c.Verdict, e.Text, e.Line, said))
				}
			}
		}
		is := find(r.Driver, LeftOnTheNode)
		switch {
		case len(is) == 0 && len(r.Left) > 0:
			bad = append(bad, fmt.Sprintf("%s: %d volume(s) left on the node, not expected", r.Driver, len(r.Left)))
		case len(is) > 0:
			for _, i := range is {
				used[i] = true
				if want, _ := strconv.Atoi(exp[i].Verdict); want != len(r.Left) {
					bad = append(bad, fmt.Sprintf("%s: %d volume(s) left on the node, expected %d (line %d)", r.Driver, len(r.Left), want, exp[i].Line))
				}
			}
		}
	}
	ran := func(e Expectation) bool {
		for _, r := range runs {
			if strings.HasSuffix(filepath.Clean(r.Driver), filepath.Clean(e.Driver)) {
				return true
			}
		}
		return false
	}
	for i, e := range exp {
		if !used[i] && ran(e) {
			bad = append(bad, fmt.Sprintf("line %d: %s %s %s: no such case ran", e.Line, e.Driver, e.Case, e.Verdict))
		}
	}
	return bad
}
