package clusterstatus

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Output formats (-o).
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// Printer writes reports. Watching, it writes the table's header once and
// then only the rows that changed, as kubectl get -w does; JSON and YAML
// are written whole, one document per change.
type Printer struct {
	Format string
	Out    io.Writer

	printed  bool
	lastRows map[string]string
	lastDoc  string
}

// Print writes r. It returns false, writing nothing, when watching and
// nothing changed since the last report.
func (p *Printer) Print(r *Report, watch bool) (bool, error) {
	switch p.Format {
	case OutputJSON, OutputYAML:
		doc, err := p.document(r)
		if err != nil {
			return false, err
		}
		// Time changes on every report: compare without it.
		stable := *r
		stable.Time = time.Time{}
		key, _ := json.Marshal(stable)
		if watch && p.printed && string(key) == p.lastDoc {
			return false, nil
		}
		p.lastDoc = string(key)
		if p.Format == OutputYAML && p.printed {
			doc = "---\n" + doc
		}
		p.printed = true
		_, err = io.WriteString(p.Out, doc)
		return true, err
	}
	header, rows := tableRows(r, p.Format == OutputWide)
	tw := tabwriter.NewWriter(p.Out, 0, 4, 2, ' ', 0)
	if !p.printed {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	seen := map[string]string{}
	wrote := !p.printed
	for _, row := range rows {
		line := strings.Join(row[1:], "\t")
		seen[row[0]] = line
		if watch && p.printed && p.lastRows[row[0]] == line {
			continue
		}
		fmt.Fprintln(tw, line)
		wrote = true
	}
	if err := tw.Flush(); err != nil {
		return false, err
	}
	if !watch || !p.printed {
		writeUnknown(p.Out, r.Unknown)
	}
	p.printed, p.lastRows = true, seen
	return wrote, nil
}

func (p *Printer) document(r *Report) (string, error) {
	if p.Format == OutputJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		return string(b) + "\n", err
	}
	b, err := yaml.Marshal(r)
	return string(b), err
}

// tableRows are the table's header and rows; each row starts with its key.
func tableRows(r *Report, wide bool) ([]string, [][]string) {
	if !wide {
		header := []string{"DRIVER", "EXPECTED", "REGISTERED", "NOT REGISTERED", "STALE", "REGISTRAR", "NODE PLUGIN"}
		var rows [][]string
		for _, d := range r.Drivers {
			name := d.Name
			if name == "" {
				name = "<unknown>"
			}
			plugins := strings.Join(d.NodePlugins, ",")
			if d.Problem != "" {
				plugins = strings.TrimPrefix(plugins+": ", ": ") + d.Problem
			}
			for _, w := range d.Warnings {
				plugins = strings.TrimPrefix(plugins+"; ", "; ") + "warning: " + w
			}
			if d.Conflicts > 0 {
				plugins = strings.TrimPrefix(plugins+"; ", "; ") + "conflict on " + strconv.Itoa(d.Conflicts) + " node(s): two node plugins serve the driver (-o wide names the pods)"
			}
			if d.KubeletRetired > 0 {
				plugins = strings.TrimPrefix(plugins+"; ", "; ") + "kubelet: " + strconv.Itoa(d.KubeletRetired) + " retired registration path(s) (-o wide: per node; a kubelet restart clears them)"
			}
			if d.Overlapping > 0 {
				plugins = strings.TrimPrefix(plugins+"; ", "; ") + "rollout or replacement in progress on " + strconv.Itoa(d.Overlapping) + " node(s)"
			}
			rows = append(rows, []string{name + "|" + strings.Join(d.NodePlugins, ","), name, strconv.Itoa(d.Expected),
				strconv.Itoa(d.Registered), strconv.Itoa(d.NotRegistered), strconv.Itoa(d.Stale), dash(d.Registrar), dash(plugins)})
		}
		return header, rows
	}
	header := []string{"DRIVER", "NODE", "STATE", "POD", "REASON"}
	var rows [][]string
	for _, d := range r.Drivers {
		name := d.Name
		if name == "" {
			name = "<unknown>"
		}
		if d.Problem != "" || len(d.Warnings) > 0 {
			reason := d.Problem
			for _, w := range d.Warnings {
				reason = strings.TrimPrefix(reason+"; ", "; ") + "warning: " + w
			}
			rows = append(rows, []string{name + "|", name, "-", "-", "-", reason})
		}
		for _, n := range d.Nodes {
			reason := n.Reason
			if n.Condition != nil {
				reason = strings.TrimPrefix(reason+"; ", "; ") + "condition " + n.Condition.Type + ": " + conditionText(n.Condition)
			}
			if k := kubeletText(n.Kubelet); k != "" {
				reason = strings.TrimPrefix(reason+"; ", "; ") + k
			}
			for _, w := range n.Warnings {
				reason = strings.TrimPrefix(reason+"; ", "; ") + "warning: " + w
			}
			for _, o := range []string{n.Conflict, n.Overlap} {
				if o != "" {
					reason = strings.TrimPrefix(reason+"; ", "; ") + o
				}
			}
			rows = append(rows, []string{name + "|" + n.Name, name, n.Name, string(n.State), dash(n.Pod), dash(reason)})
		}
	}
	return header, rows
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeUnknown says which parts of the answer are unknown, and the missing
// permission by name.
func writeUnknown(w io.Writer, unknown []Unknown) {
	if len(unknown) == 0 {
		return
	}
	fmt.Fprintf(w, "\nThe answer is incomplete: %d part(s) unknown.\n", len(unknown))
	for _, u := range unknown {
		line := "unknown: " + u.What + ": " + u.Error
		if u.Permission != "" {
			line += "; missing permission: " + u.Permission
		}
		fmt.Fprintf(w, "%s; so %s\n", line, u.Consequence)
	}
}
