// Package kubeletplugins reads the kubelet's view of its plugin
// registrations: the gauge plugin_manager_total_plugins of the kubelet's
// /metrics (k8s.io/kubernetes pkg/kubelet/pluginmanager/metrics, 1.34 to
// 1.37), one series per registration socket path and state. It is the only
// place that shows the registrations the rolling-update mode retired: their
// files are gone, and the kubelet keeps them in its desired and its actual
// state until it restarts (docs/performance.md, "What retired registrations
// cost the kubelet").
//
// Through the API server the metric is read at ProxyPath(node), which needs
// the RBAC permission `get nodes/proxy`.
package kubeletplugins

import (
	"bytes"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The kubelet's metric, its labels and the values of its state label.
const (
	Metric       = "plugin_manager_total_plugins"
	LabelSocket  = "socket_path"
	LabelState   = "state"
	StateActual  = "actual_state_of_world"
	StateDesired = "desired_state_of_world"
	// Permission is the RBAC rule that reading ProxyPath needs.
	Permission = "get nodes/proxy"
)

// ReconcilerPeriod is how often the kubelet's plugin manager reconciles
// its desired state (the sockets its watcher saw) with its actual state (the
// registrations): pkg/kubelet/pluginmanager's loopSleepDuration. A socket
// event takes effect within one period; the tests' observation windows are
// counted in it.
const ReconcilerPeriod = time.Second

// RetiredWarn is the number of retired registrations of one driver on one
// node from which they are worth a kubelet restart: at 100 the kubelet's
// reconciler spends about 2.5 ms of CPU and allocates 3.3 MB every second
// on them, and the cost grows with the square (docs/performance.md).
const RetiredWarn = 100

// Advice is what to do about retired registrations.
const Advice = "a kubelet restart clears them (the paths are gone from disk; the kubelet's caches start empty); " +
	"what they cost the kubelet: docs/performance.md, \"What retired registrations cost the kubelet\""

// ProxyPath is the API server path of the kubelet's /metrics on node.
func ProxyPath(node string) string {
	return "/api/v1/nodes/" + url.PathEscape(node) + "/proxy/metrics"
}

// Path is one registration socket path and where the kubelet holds it.
type Path struct {
	Actual  bool // registered (actual state of world)
	Desired bool // seen by the plugin watcher (desired state of world)
}

// State is the kubelet's plugin manager by socket path.
type State map[string]Path

// Parse reads the metric from a /metrics text. A text without the metric is
// an empty State (a kubelet with no plugin socket has no series); a text
// that does not parse is an error.
func Parse(metrics []byte) (State, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return nil, fmt.Errorf("the kubelet's /metrics does not parse: %w", err)
	}
	st := State{}
	f := families[Metric]
	if f == nil {
		return st, nil
	}
	for _, m := range f.GetMetric() {
		var sock, state string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case LabelSocket:
				sock = l.GetValue()
			case LabelState:
				state = l.GetValue()
			}
		}
		if sock == "" || m.GetGauge().GetValue()+m.GetUntyped().GetValue() <= 0 {
			continue
		}
		p := st[sock]
		switch state {
		case StateActual:
			p.Actual = true
		case StateDesired:
			p.Desired = true
		default:
			return nil, fmt.Errorf("the kubelet's %s has state %q for %s; this tool knows %s and %s",
				Metric, state, sock, StateActual, StateDesired)
		}
		st[sock] = p
	}
	return st, nil
}

// Driver is what the kubelet holds for one driver's registration paths.
type Driver struct {
	// Actual are the paths registered (in the actual state), sorted.
	Actual []string `json:"actual,omitempty"`
	// DesiredOnly are the paths the plugin watcher saw and the kubelet never
	// registered: dialed and failed (a dead socket), rejected, or being
	// registered right now. Sorted.
	DesiredOnly []string `json:"desiredOnly,omitempty"`
	// ActualOnly are registered paths whose file the plugin watcher saw
	// removed: the kubelet unregisters them in its next round. Sorted.
	ActualOnly []string `json:"actualOnly,omitempty"`
}

// Driver returns the paths of the driver's registration sockets: its
// rolling-update announcement sockets (<prefix>_<instance>_<v>-reg.sock),
// <driver>-reg.sock, and sockets in a directory named for the driver.
func (s State) Driver(name string) Driver {
	var d Driver
	for sock, p := range s {
		if !IsDriverPath(name, sock) {
			continue
		}
		if p.Actual {
			d.Actual = append(d.Actual, sock)
		}
		switch {
		case p.Desired && !p.Actual:
			d.DesiredOnly = append(d.DesiredOnly, sock)
		case p.Actual && !p.Desired:
			d.ActualOnly = append(d.ActualOnly, sock)
		}
	}
	sort.Strings(d.Actual)
	sort.Strings(d.DesiredOnly)
	sort.Strings(d.ActualOnly)
	return d
}

// IsDriverPath reports whether sock is a registration socket path of the driver.
func IsDriverPath(driver, sock string) bool {
	base := path.Base(sock)
	if base == driver+csiplugin.RegistrationSocketSuffix || path.Base(path.Dir(sock)) == driver {
		return true
	}
	_, _, ok := csiplugin.ParseRollingUpdateSocketName(driver, base)
	return ok
}

// IsModePath reports whether sock is an announcement socket of the
// rolling-update mode of the driver.
func IsModePath(driver, sock string) bool {
	_, _, ok := csiplugin.ParseRollingUpdateSocketName(driver, path.Base(sock))
	return ok
}

// Latest is the registered path the kubelet took last, as far as the names
// tell: the announcement with the highest version, else the plain path.
// "" when nothing is registered.
func (d Driver) Latest(driver string) string {
	latest, best := "", uint64(0)
	for _, sock := range d.Actual {
		_, _, v, ok := csiplugin.SplitRollingUpdateSocketName(path.Base(sock))
		switch {
		case ok && IsModePath(driver, sock) && (latest == "" || v > best):
			latest, best = sock, v
		case !IsModePath(driver, sock) && latest == "":
			latest = sock
		}
	}
	return latest
}

// Summary is one line on the driver's paths: how many are registered,
// which is live (or taken to be), how many are retired, and what was
// dialed and never registered. live is the live registration socket's path
// when the caller knows it ("" to take the latest announcement).
func (d Driver) Summary(driver, live string) string {
	if live == "" {
		live = d.Latest(driver)
	}
	var parts []string
	switch n := len(d.Actual); {
	case n == 0:
		parts = append(parts, "no registration path of the driver in its actual state")
	default:
		parts = append(parts, fmt.Sprintf("%d registration path(s) in its actual state (live: %s; retired: %d)",
			n, path.Base(live), d.Retired(live)))
	}
	if len(d.DesiredOnly) > 0 {
		parts = append(parts, fmt.Sprintf("%d dialed and never registered (desired state only): %s",
			len(d.DesiredOnly), baseNames(d.DesiredOnly)))
	}
	return "kubelet: " + strings.Join(parts, "; ")
}

// Retired is the number of registered paths other than live.
func (d Driver) Retired(live string) int {
	n := 0
	for _, sock := range d.Actual {
		if sock != live {
			n++
		}
	}
	return n
}

func baseNames(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = path.Base(p)
	}
	return strings.Join(names, ", ")
}
