package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// KubeletState is the kubelet's plugin manager as its metric
// plugin_manager_total_plugins shows it: the only place that shows the
// registrations the rolling-update mode retired (their files are gone).
type KubeletState struct {
	// Source is where it was read: the API server's node proxy path, or a file.
	Source string `json:"source"`
	// Error says why it could not be read ("" when it was).
	Error string `json:"error,omitempty"`
	// Drivers are the registration paths the kubelet holds, by driver.
	Drivers map[string]kubeletplugins.Driver `json:"drivers,omitempty"`
}

// kubeletMetricsFix is the fix of a metric that could not be read.
const kubeletMetricsFix = "grant the kubeconfig's user `" + kubeletplugins.Permission + "` (the kubelet's own kubeconfig does not have it), " +
	"or save the kubelet's /metrics (kubectl get --raw /api/v1/nodes/NODE/proxy/metrics, or the kubelet's port 10250 with a " +
	"client certificate allowed `get nodes/metrics`) and pass it with --kubelet-metrics FILE"

// fetchKubelet reads the kubelet's plugin state from Options.KubeletMetrics
// or, with a kubeconfig, through the API server's node proxy. What cannot
// be read is an info finding: the rest of the diagnosis stands without it.
func (d *diagnosis) fetchKubelet(ctx context.Context, api *apiClient) {
	ks := &KubeletState{}
	st := d.saved
	var err error
	switch {
	case st != nil:
		ks.Source = d.opts.KubeletMetrics
	case api != nil:
		ks.Source = kubeletplugins.ProxyPath(d.opts.NodeName)
		var body []byte
		if body, err = api.getRaw(ctx, ks.Source, "text/plain"); err == nil {
			st, err = kubeletplugins.Parse(body)
		}
	default:
		return
	}
	d.report.Kubelet = ks
	if err != nil {
		ks.Error = err.Error()
		msg := "cannot read the kubelet's plugin state (" + kubeletplugins.Metric + "), which alone shows retired registrations and paths the kubelet redials: %v"
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusForbidden {
			msg = "cannot read the kubelet's plugin state (" + kubeletplugins.Metric + "): the API server refused `" +
				kubeletplugins.Permission + "` to this kubeconfig's user; retired registrations and paths the kubelet redials are not shown: %v"
		}
		d.addf(SeverityInfo, "kubelet "+d.opts.NodeName, kubeletMetricsFix, msg, err)
		return
	}
	ks.Drivers = map[string]kubeletplugins.Driver{}
	for _, name := range d.kubeletDriverNames(st) {
		if v := st.Driver(name); len(v.Actual)+len(v.DesiredOnly)+len(v.ActualOnly) > 0 {
			ks.Drivers[name] = v
		}
	}
}

// kubeletDriverNames are the drivers the registry's sockets announce, and
// the names the metric's paths carry (<name>-reg.sock, <name>_<instance>_<v>-reg.sock).
func (d *diagnosis) kubeletDriverNames(st kubeletplugins.State) []string {
	names := map[string]bool{}
	for _, e := range d.report.Entries {
		if e.Plugin != nil && e.Plugin.Type == "CSIPlugin" {
			names[e.Plugin.Name] = true
		}
	}
	for sock := range st {
		base := filepath.Base(sock)
		if prefix, _, _, ok := csiplugin.SplitRollingUpdateSocketName(base); ok {
			names[prefix] = true
		} else if name, ok := cutSuffix(base, csiplugin.RegistrationSocketSuffix); ok {
			names[name] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

// compareKubelet says, per driver, what the kubelet holds that the files
// no longer show, and what it did that the rolling-update mode does not
// expect.
func (d *diagnosis) compareKubelet() {
	ks := d.report.Kubelet
	if ks == nil || ks.Drivers == nil {
		return
	}
	live := map[string]*Entry{} // driver -> the newest live socket that announces it
	byPath := map[string]*Entry{}
	for i := range d.report.Entries {
		e := &d.report.Entries[i]
		byPath[e.Path] = e
		if e.Plugin == nil || e.Plugin.Type != "CSIPlugin" {
			continue
		}
		if cur := live[e.Plugin.Name]; cur == nil || e.Instance != nil && (cur.Instance == nil || e.Instance.Version > cur.Instance.Version) {
			live[e.Plugin.Name] = e
		}
	}
	names := slices.Sorted(maps.Keys(ks.Drivers))
	for _, name := range names {
		v := ks.Drivers[name]
		livePath := ""
		if e := live[name]; e != nil {
			livePath = e.Path
		}
		d.kubeletFindings(name, v, livePath, live[name], byPath)
	}
	// A driver a socket of the mode serves, of which the kubelet holds nothing.
	for name, e := range live {
		if _, held := ks.Drivers[name]; !held && e.Instance != nil {
			d.addf(SeverityWarning, name,
				"restart the registrar's container (or delete its pod) so that it announces again; report it with the kubelet's version: the mode relies on kubelet behaviour no API promises (docs/design.md)",
				"the kubelet holds no registration path of the driver while a rolling-update instance serves %s: the kubelet unregistered it, which the mode does not expect (a registrar hears nothing of a deregistration)",
				filepath.Base(e.Path))
		}
	}
}

func (d *diagnosis) kubeletFindings(name string, v kubeletplugins.Driver, livePath string, liveEntry *Entry, byPath map[string]*Entry) {
	retired := v.Retired(livePath)
	var notMode []string
	for _, sock := range v.Actual {
		if sock != livePath && byPath[sock] == nil && !kubeletplugins.IsModePath(name, sock) {
			notMode = append(notMode, filepath.Base(sock))
		}
	}
	if retired > 0 {
		sev := SeverityInfo
		if retired >= kubeletplugins.RetiredWarn {
			sev = SeverityWarning
		}
		d.addf(sev, name, kubeletplugins.Advice, "%s; the retired ones' files are gone and the kubelet keeps them until it restarts",
			v.Summary(name, livePath))
	}
	if len(notMode) > 0 {
		d.addf(SeverityWarning, name, "a kubelet restart clears them; report it with the kubelet's version and the registrar's log",
			"the kubelet holds registrations whose files are gone and that no rolling-update instance made: %v", notMode)
	}
	if liveEntry != nil && liveEntry.Instance != nil && len(v.Actual) > 0 && !contains(v.Actual, livePath) && !contains(v.DesiredOnly, livePath) {
		d.addf(SeverityWarning, name, "restart the registrar's container (or delete its pod) so that it announces again; report it with the kubelet's version",
			"the kubelet never saw the live announcement %s (it is in neither of its states) while it holds %d older path(s) of the driver: the mode does not expect it",
			filepath.Base(livePath), len(v.Actual))
	}
	for _, sock := range v.DesiredOnly {
		e := byPath[sock]
		if e != nil && e.Plugin != nil {
			d.addf(SeverityInfo, sock, "if it stays, look for its path in the kubelet's log (journalctl -u kubelet): a rejection names the cause",
				"the kubelet has this live socket in its desired state only: it is registering it now, or rejected it")
			continue
		}
		state := "gone from disk"
		if e != nil {
			state = "on disk, not answering GetInfo"
		}
		d.addf(SeverityWarning, sock, "a kubelet restart clears it (remove the file first if it is still there, as a kubelet restart dials what is on disk)",
			"the kubelet dialed this path and never registered it (desired state only; the file is %s): it redials it every ~2 minutes, one error line each time, until it restarts", state)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// kubeletText is the text output's section on the kubelet's plugin state.
func kubeletText(ks *KubeletState) [][]string {
	if ks == nil {
		return nil
	}
	if ks.Error != "" {
		return [][]string{{"KUBELET (" + kubeletplugins.Metric + ")", "not read: " + ks.Error}}
	}
	rows := [][]string{{"KUBELET DRIVER", "ACTUAL STATE", "RETIRED", "DESIRED ONLY", "LATEST REGISTERED"}}
	names := slices.Sorted(maps.Keys(ks.Drivers))
	for _, n := range names {
		v := ks.Drivers[n]
		latest := v.Latest(n)
		rows = append(rows, []string{n, fmt.Sprint(len(v.Actual)), fmt.Sprint(v.Retired(latest)), fmt.Sprint(len(v.DesiredOnly)), dash(baseOrEmpty(latest))})
	}
	if len(names) == 0 {
		rows = append(rows, []string{"(no registration path in " + kubeletplugins.Metric + ")", "", "", "", ""})
	}
	return rows
}

func baseOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Base(p)
}

// readKubeletMetrics reads and parses a saved /metrics text; "" is none.
func readKubeletMetrics(path string) (kubeletplugins.State, error) {
	if path == "" {
		return nil, nil
	}
	const fix = "pass a file saved from the kubelet's /metrics, e.g. kubectl get --raw /api/v1/nodes/NODE/proxy/metrics > FILE"
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, badOption("kubelet metrics", path, "cannot be read: "+err.Error(), fix)
	}
	st, err := kubeletplugins.Parse(body)
	if err != nil {
		return nil, badOption("kubelet metrics", path, err.Error(), fix)
	}
	return st, nil
}
