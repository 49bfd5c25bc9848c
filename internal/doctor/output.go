package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// WriteJSON writes the report as one indented JSON document.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as tables: the registry's entries, the CSI
// drivers behind them, what the API server holds (with a kubeconfig), and
// the findings, one line each with its fix; then a one-line verdict. Paths
// inside the registry are shown relative to it.
func WriteText(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(cols ...string) { fmt.Fprintln(tw, strings.Join(cols, "\t")) }
	where := r.PluginsRegistry
	if r.HostRoot != "" {
		where += " (under " + r.HostRoot + ")"
	}
	node := r.NodeName
	if node == "" {
		node = "(not given)"
	}
	fmt.Fprintf(w, "plugins registry %s, node %s\n\n", where, node)

	if len(r.Entries) == 0 {
		fmt.Fprintln(w, "no entries")
	} else {
		line("ENTRY", "KIND", "OWNER", "MODE", "AGE", "GETINFO")
		for _, e := range r.Entries {
			rel, err := filepath.Rel(r.PluginsRegistry, e.Path)
			if err != nil {
				rel = e.Path
			}
			kind := e.Kind
			if e.Target != "" {
				kind += " -> " + e.Target
			}
			line(rel, kind, fmt.Sprintf("%d:%d", e.UID, e.GID), e.Mode, e.Age, getInfoText(e))
		}
	}
	tw.Flush()

	var drivers []*Entry
	for i := range r.Entries {
		if r.Entries[i].Driver != nil {
			drivers = append(drivers, &r.Entries[i])
		}
	}
	if len(drivers) > 0 {
		fmt.Fprintln(w)
		line("DRIVER", "ENDPOINT", "PROBE", "PLUGIN INFO", "NODE ID", "TOPOLOGY")
		for _, e := range drivers {
			drv := e.Driver
			probe := "failed"
			if drv.Ready != nil {
				probe = map[bool]string{true: "ready", false: "not ready"}[*drv.Ready]
			}
			info := drv.Name
			if drv.VendorVersion != "" {
				info += " " + drv.VendorVersion
			}
			endpoint := drv.Endpoint
			if drv.Link != "" {
				endpoint += " -> " + drv.Link
			}
			line(e.Plugin.Name, endpoint, probe, dash(info), dash(drv.NodeID), dash(pairs(drv.Topology)))
		}
		tw.Flush()
	}

	if a := r.API; a != nil {
		fmt.Fprintln(w)
		var cn []string
		for _, c := range a.CSINode {
			cn = append(cn, c.Name+"="+c.NodeID)
		}
		csinode := dash(strings.Join(cn, ", "))
		if a.CSINode == nil {
			csinode = "(not read)"
		}
		csidrivers := dash(strings.Join(a.CSIDrivers, ", "))
		if a.CSIDrivers == nil {
			csidrivers = "(not read)"
		}
		line("API SERVER", "")
		line("  Node annotation "+csiplugin.NodeIDAnnotation, dash(pairs(a.NodeIDs)))
		line("  CSINode "+r.NodeName+" drivers", csinode)
		line("  CSIDriver objects", csidrivers)
		tw.Flush()
	}

	if rows := kubeletText(r.Kubelet); rows != nil {
		fmt.Fprintln(w)
		for _, row := range rows {
			line(row...)
		}
		tw.Flush()
	}

	fmt.Fprintln(w)
	if len(r.Findings) > 0 {
		line("SEVERITY", "SUBJECT", "MESSAGE", "FIX")
		for _, f := range r.Findings {
			line(string(f.Severity), strings.TrimPrefix(f.Subject, r.PluginsRegistry+"/"), f.Message, f.Fix)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, verdict(r))
	return err
}

func getInfoText(e Entry) string {
	switch {
	case e.Ignored != "":
		return "(" + e.Ignored + ")"
	case e.Plugin != nil:
		p := e.Plugin
		endpoint := p.Endpoint
		if endpoint == "" {
			endpoint = "(this socket)"
		}
		return fmt.Sprintf("ok: %s %s, versions %s, endpoint %s", p.Type, p.Name, strings.Join(p.Versions, ","), endpoint)
	case e.GetInfo != "":
		return e.GetInfo
	case e.Kind == KindSocket:
		return "-"
	}
	return "(not a socket: ignored by the kubelet)"
}

func verdict(r *Report) string {
	sockets, csi := 0, 0
	for _, e := range r.Entries {
		if e.Kind == KindSocket && e.Ignored == "" {
			sockets++
		}
		if e.Plugin != nil && e.Plugin.Type == "CSIPlugin" {
			csi++
		}
	}
	counts := fmt.Sprintf("%d socket(s), %d CSI plugin(s)", sockets, csi)
	if r.Healthy() {
		if n := r.Count(SeverityInfo); n > 0 {
			return fmt.Sprintf("healthy: %s, %d note(s)", counts, n)
		}
		return "healthy: " + counts + ", no findings"
	}
	return fmt.Sprintf("NOT healthy: %d error(s), %d warning(s); %s", r.Count(SeverityError), r.Count(SeverityWarning), counts)
}

func pairs(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return strings.Join(out, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
