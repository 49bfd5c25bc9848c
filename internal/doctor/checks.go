package doctor

import (
	"sort"
	"strings"
)

// findDuplicates flags driver names announced by more than one live socket:
// the kubelet rejects the second registration of a name with an equal
// version, and which one wins depends on the order it saw them.
func (d *diagnosis) findDuplicates() {
	byName := map[string][]string{}
	for _, e := range d.report.Entries {
		if e.Plugin != nil && e.Plugin.Type == "CSIPlugin" {
			byName[e.Plugin.Name] = append(byName[e.Plugin.Name], e.Path)
		}
	}
	names := make([]string, 0, len(byName))
	for n, paths := range byName {
		if len(paths) > 1 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		d.addf(SeverityError, n, "run one registrar per driver and node: remove the copy that should not run (a second DaemonSet, a leftover of an older install)",
			"duplicate: %d live sockets announce this driver name (%s); the kubelet rejects all but one",
			len(byName[n]), strings.Join(byName[n], ", "))
	}
}
