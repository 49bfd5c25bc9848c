package doctor

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Instance is the rolling-update instance (csi-registrar --rolling-update)
// behind an announcement socket, <prefix>_<instance>_<version>-reg.sock:
// what the name says and, when several live sockets announce its driver,
// the state the instance told over its handover service.
type Instance struct {
	ID      string `json:"id"`
	Version uint64 `json:"version"` // of this socket's name
	// State is the instance's own account: its pod's birth, whether the
	// kubelet confirmed its latest announcement, whether it is terminating.
	State *registrar.InstanceState `json:"state,omitempty"`
	// StateError says why the state could not be read.
	StateError string `json:"stateError,omitempty"`
}

// markInstance records on e whether its name is an announcement socket's.
func markInstance(e *Entry) {
	if _, id, v, ok := csiplugin.SplitRollingUpdateSocketName(filepath.Base(e.Path)); ok {
		e.Instance = &Instance{ID: id, Version: v}
	}
}

// liveInstance is one rolling-update instance of a driver with live sockets.
type liveInstance struct {
	id     string
	latest *Entry // its socket of the highest version
	st     registrar.InstanceState
}

// findOverlaps judges the drivers announced by more than one live socket,
// and the announcement sockets nobody listens on.
//
// Without the rolling-update mode, two live sockets of one driver name are
// a duplicate: the kubelet rejects the second registration of a name with
// an equal version, and which one wins depends on the order it saw them.
// With the mode, several instances of one driver overlap while a DaemonSet
// rolls out with maxSurge: the newest holds the registration, the older
// ones stand by or leave; their states, read over the handover service,
// tell a rollout from a stuck one. A dead instance's socket next to a live
// one is harmless: the kubelet's registration follows the latest
// confirmed announcement.
func (d *diagnosis) findOverlaps(ctx context.Context) {
	byName := map[string][]*Entry{}
	for i := range d.report.Entries {
		e := &d.report.Entries[i]
		if e.Plugin != nil && e.Plugin.Type == registerapi.CSIPlugin {
			byName[e.Plugin.Name] = append(byName[e.Plugin.Name], e)
		}
	}
	names := slices.Sorted(maps.Keys(byName))
	for _, n := range names {
		if len(byName[n]) > 1 {
			d.overlap(ctx, n, byName[n])
		}
	}
	d.deadInstances(names, byName)
}

// overlap judges the live sockets of one driver name, two or more.
func (d *diagnosis) overlap(ctx context.Context, name string, entries []*Entry) {
	var plain []string
	byID := map[string]*liveInstance{}
	var ids []string
	for _, e := range entries {
		id, v, ok := csiplugin.ParseRollingUpdateSocketName(name, filepath.Base(e.Path))
		if !ok {
			// The driver's plain <name>-reg.sock: a registrar without the
			// mode, or an instance of the mode that announced there after
			// such a registrar left it (it serves its state; the name
			// carries no instance).
			st, err := within(ctx, d.opts.Timeout, func(c context.Context) (registrar.InstanceState, error) {
				return registrar.FetchInstanceState(c, d.local(e.Path))
			})
			if err != nil || st.Instance == "" {
				plain = append(plain, e.Path)
				continue
			}
			id, v = st.Instance, st.Version
			e.Instance = &Instance{ID: id, Version: v}
		}
		li := byID[id]
		if li == nil {
			li = &liveInstance{id: id}
			byID[id] = li
			ids = append(ids, id)
		}
		if li.latest == nil || v > li.latest.Instance.Version {
			li.latest = e
		}
	}
	if len(plain) > 1 {
		d.addf(SeverityError, name, "run one registrar per driver and node: remove the copy that should not run (a second DaemonSet, a leftover of an older install)",
			"duplicate: %d live sockets announce this driver name (%s); the kubelet rejects all but one",
			len(plain), strings.Join(plain, ", "))
	}
	if len(ids) == 0 {
		return
	}
	sort.Strings(ids)
	insts := make([]*liveInstance, 0, len(ids))
	for _, id := range ids {
		li := byID[id]
		st, err := within(ctx, d.opts.Timeout, func(c context.Context) (registrar.InstanceState, error) {
			return registrar.FetchInstanceState(c, d.local(li.latest.Path))
		})
		if err != nil {
			li.latest.Instance.StateError = err.Error()
			d.addf(SeverityWarning, name, "check that every registrar of this driver is csi-registrar with --rolling-update; `kubectl csi-registrar status` tells a rollout from a second node plugin",
				"%d live sockets announce this driver and the state of rolling-update instance %s (%s) could not be read: %v; doctor cannot tell a rollout from a conflict",
				len(entries), id, filepath.Base(li.latest.Path), err)
			return
		}
		li.st = st
		li.latest.Instance.State = &st
		insts = append(insts, li)
	}
	if len(plain) > 0 {
		d.addf(SeverityInfo, name, "nothing to do while the node plugin rolls out into the mode; if both stay, two node plugins run this driver (`kubectl csi-registrar status` names them): remove the one without --rolling-update",
			"instances with and without the rolling-update mode: %s (a registrar without the mode) and %s announce this driver; expected briefly during the first rollout into the mode: the registrar without the mode unregisters the driver when it leaves, and the newest instance registers it again within seconds",
			strings.Join(plain, ", "), describeInstances(insts))
	}
	if len(insts) > 1 {
		d.judgeInstances(name, insts)
	}
}

// judgeInstances tells a rollout in progress from a stuck one, given the
// states of two or more live instances of one driver.
func (d *diagnosis) judgeInstances(name string, insts []*liveInstance) {
	sort.SliceStable(insts, func(i, j int) bool { return insts[i].st.NewerThan(insts[j].st) })
	newest, older := insts[0].st, insts[1:]
	which := describeInstances(insts)
	const stays = "if it stays, two node plugins run this driver (`kubectl csi-registrar status` tells a rollout from a second DaemonSet): keep one"
	switch {
	case newest.Terminating:
		d.addf(SeverityInfo, name, "nothing to do: a leaving instance retires its sockets without unregistering the driver once another one is confirmed after it",
			"rollout in progress: the newest instance is terminating (the rollout was undone, or its pod deleted), the older ones take the registration back: %s", which)
	case newest.Failed:
		d.addf(SeverityWarning, name, "read the new pod's registrar (/readyz says \"kubelet rejected: <the kubelet's error>\", and its log), fix the cause, then delete the new pod: its replacement announces again",
			"rollout stuck: the kubelet rejected the new instance's registration; the older instance holds the driver: %s", which)
	case newest.DriverDown:
		d.addf(SeverityWarning, name, "read the new pod's driver container (its restarts and its log): the older instance holds the registration until the new driver has answered Probe ready for 10 s, then the newest takes it back",
			"rollout held: the newest instance's driver does not answer Probe, so the older instance takes the registration back: %s", which)
	case !newest.Confirmed:
		d.addf(SeverityWarning, name, "wait a few seconds: the kubelet registers a new socket within its next rounds (1 s each); "+
			"if it stays, read the new pod's registrar /readyz and log, and the kubelet's log (journalctl -u kubelet | grep "+name+")",
			"rollout in progress: the new instance is not registered yet: %s", which)
	default:
		for _, o := range older {
			if !o.st.Terminating && !o.st.Failed && o.st.Confirmed && o.st.ConfirmedAt > newest.ConfirmedAt {
				d.addf(SeverityWarning, name, "wait a few seconds: the newest instance announces again and is confirmed; "+stays,
					"instances compete: the kubelet confirmed older instance %s after the newest one (expected for seconds after a kubelet restart, which registers every socket again): %s", o.id, which)
				return
			}
		}
		d.addf(SeverityInfo, name, "nothing to do while the DaemonSet rolls out: the older instances leave without unregistering the driver; "+stays,
			"rollout in progress: %d live instances of this driver; the newest holds the registration, the older ones stand by or leave: %s", len(insts), which)
	}
}

// describeInstances lists instances, newest first when sorted so:
// "instance 1a2b3c4d (x_1a2b3c4d_17-reg.sock: newest, confirmed by the
// kubelet 3s ago), instance ...".
func describeInstances(insts []*liveInstance) string {
	newest := insts[0]
	for _, li := range insts[1:] {
		if li.st.NewerThan(newest.st) {
			newest = li
		}
	}
	parts := make([]string, len(insts))
	for i, li := range insts {
		var what []string
		if len(insts) > 1 {
			what = append(what, map[bool]string{true: "newest", false: "older"}[li == newest])
		}
		what = append(what, stateText(li.st))
		if li != newest && !li.st.Terminating {
			// An older instance never announces while the newest is
			// eligible; the kubelet's registration stays with the one it
			// confirmed last.
			if li.st.Confirmed && !li.st.Failed && li.st.ConfirmedAt > newest.st.ConfirmedAt {
				what = append(what, "holds the registration")
			} else {
				what = append(what, "standing by")
			}
		}
		parts[i] = "instance " + li.id + " (" + filepath.Base(li.latest.Path) + ": " + strings.Join(what, ", ") + ")"
	}
	return strings.Join(parts, ", ")
}

// stateText is an instance's state in words.
func stateText(st registrar.InstanceState) string {
	var s string
	switch {
	case st.Failed:
		s = "rejected by the kubelet"
	case st.Confirmed:
		s = "confirmed by the kubelet"
		if st.ConfirmedAt > 0 {
			s += " " + age(time.Since(time.UnixMilli(st.ConfirmedAt))) + " ago"
		}
	case st.Version == 0:
		s = "not announced yet"
	default:
		s = "announced version " + csiplugin.RollingUpdateVersion(st.Version) + ", not confirmed yet"
	}
	if st.DriverDown {
		s += ", its driver does not answer Probe"
	}
	if st.Terminating {
		s += ", terminating"
	}
	return s
}

// deadInstances judges the announcement sockets nobody listens on: a dead
// instance's leftover next to a live socket of its driver is harmless; one
// without is a stale socket.
func (d *diagnosis) deadInstances(names []string, byName map[string][]*Entry) {
	for i := range d.report.Entries {
		e := &d.report.Entries[i]
		if e.Instance == nil || e.GetInfo != GetInfoStale {
			continue
		}
		base := filepath.Base(e.Path)
		var driver string
		for _, n := range names {
			if _, _, ok := csiplugin.ParseRollingUpdateSocketName(n, base); ok {
				driver = n
				break
			}
		}
		if driver == "" {
			prefix, _, _, _ := csiplugin.SplitRollingUpdateSocketName(base)
			d.addf(SeverityError, e.Path, "start the driver's node plugin if it is still wanted (its instances remove this file when the last one leaves the node); if not, remove the file (rm "+e.Path+")",
				"stale socket of a dead rolling-update instance (%s of driver %s): nobody listens on it (connection refused), and no live socket of its driver is on the node; the kubelet's registration of it fails, or points at a driver that is gone",
				e.Instance.ID, prefix)
			continue
		}
		live := make([]string, len(byName[driver]))
		for i, l := range byName[driver] {
			live[i] = filepath.Base(l.Path)
		}
		d.addf(SeverityInfo, e.Path, "nothing to do: the last instance of the driver to leave the node removes it (so does the driver's uninstall); do not rm it: a removal by name can make the kubelet unregister the driver (to remove it now, mv it to a name starting with \".\" in the same directory, then rm that)",
			"a dead instance's leftover: rolling-update socket of instance %s of %s (version %s); nobody listens on it (connection refused), which is harmless while %s serves the driver: the kubelet's registration follows the latest confirmed announcement",
			e.Instance.ID, driver, csiplugin.RollingUpdateVersion(e.Instance.Version), strings.Join(live, ", "))
	}
}
