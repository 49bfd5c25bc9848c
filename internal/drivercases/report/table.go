package report

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/mdtable"
)

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

// LeftText is the summary's "left on the node" section: each leftover with
// the commands that remove it ("" when nothing is left).
func LeftText(runs []Result) string {
	var b strings.Builder
	for _, r := range runs {
		for _, l := range r.Left {
			if b.Len() == 0 {
				b.WriteString("==== left on the node (the driver's volumes whose pods are gone; the kubelet keeps retrying NodeUnpublishVolume while the driver runs). Remove them as root on the node:\n")
			}
			fmt.Fprintf(&b, "- %s: %s\n", r.Driver, l)
			for _, c := range l.Cleanup() {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
	}
	if b.Len() > 0 {
		b.WriteString("    (and the driver's own state of those volume IDs, if it keeps any)\n")
	}
	return b.String()
}
