package drivercases

import (
	"bufio"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
)

// ReadinessText is the summary of the mode-readiness cases: per driver,
// each case's verdict and what it found (the cause and the fix), or why it
// is not judged; "" when none ran.
func ReadinessText(runs []report.Result) string {
	var b strings.Builder
	for _, r := range runs {
		for _, c := range r.Cases {
			if !slices.Contains(ReadinessCases(), c.Case) {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("==== ready for rolling updates? (" + ReadinessDoc + ")\n")
			}
			fmt.Fprintf(&b, "%s %s: %s\n", filepath.Base(r.Driver), c.Case, c.Verdict)
			for _, f := range c.Findings {
				fmt.Fprintf(&b, "    - %s\n", f)
			}
			if len(c.Findings) == 0 && c.Note != "" && c.Verdict != "pass" {
				fmt.Fprintf(&b, "    - %s\n", c.Note)
			}
		}
	}
	return b.String()
}

// ParseExpectations reads an expectation file: one expectation a line,
// "<driver> <case> <verdict> <text...>" (a verdict with a space, "not
// judged", is written not_judged; several lines of one case must all
// hold); # starts a comment.
func ParseExpectations(text string) ([]report.Expectation, error) {
	var out []report.Expectation
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("line %d %q: want <driver> <case> <verdict> [text the finding contains]", n, line)
		}
		e := report.Expectation{Driver: f[0], Case: f[1], Verdict: strings.ReplaceAll(f[2], "_", " "), Line: n}
		if len(f) > 3 {
			e.Text = strings.Join(f[3:], " ")
		}
		if e.Case != report.LeftOnTheNode && !slices.Contains(append(Cases(), CaseDeployed, CaseUninstalled), e.Case) {
			return nil, fmt.Errorf("line %d: case %q: want one of %s, %s, %s or %s", n, e.Case, strings.Join(Cases(), ", "), CaseDeployed, CaseUninstalled, report.LeftOnTheNode)
		}
		if e.Case == report.LeftOnTheNode {
			if _, err := strconv.Atoi(e.Verdict); err != nil {
				return nil, fmt.Errorf("line %d: %s wants a count of volumes, not %q", n, report.LeftOnTheNode, e.Verdict)
			}
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
