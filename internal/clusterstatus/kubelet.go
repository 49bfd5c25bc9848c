package clusterstatus

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// KubeletPaths is what the kubelet holds for one driver on one node, from
// its metric plugin_manager_total_plugins (Options.KubeletState): the only
// place that shows the registrations an earlier release's rolling-update
// mode retired (its announcements; the handover keeps one path).
type KubeletPaths struct {
	// Actual is the number of the driver's registration paths in the
	// kubelet's actual state (registered).
	Actual int `json:"actual"`
	// Retired is Actual less the latest registered path: paths whose files
	// are gone, kept until the kubelet restarts.
	Retired int `json:"retired"`
	// Latest is the registered path the kubelet took last, as the names
	// tell (the highest announcement version, else the plain path).
	Latest string `json:"latest,omitempty"`
	// DesiredOnly are paths the kubelet saw and never registered: dialed
	// and failed, rejected, or being registered right now.
	DesiredOnly []string `json:"desiredOnly,omitempty"`
}

// kubeletTask is a node whose kubelet state Options.KubeletState reads for
// a driver: a node plugin pod of the driver runs there, or the kubelet
// wrote the driver there.
type kubeletTask struct {
	driver, node       int // indexes into Report.Drivers and Driver.Nodes
	driverName, nodeOf string
	mode               bool // the pod's registrar runs the handover (--rolling-update)
	ready              bool // the pod is ready: its registrar says the kubelet registered it
}

// kubeletTaskOf returns the node's kubelet task for the driver, if any.
func kubeletTaskOf(driver string, n Node, dp *driverPlugins) (kubeletTask, bool) {
	t := kubeletTask{driverName: driver, nodeOf: n.Name}
	if pod := dp.pods[n.Name]; pod != nil && pod.Spec.NodeName != "" {
		t.mode = rollingMode(pod.Spec.Containers, dp.groupOf[pod])
		t.ready = podRunning(pod) && podReady(pod)
		return t, true
	}
	return t, n.State == StateRegistered || n.State == StateStale
}

// rollingMode reports whether a registering container of the pod runs
// csi-registrar's handover (--rolling-update=<pod UID>).
func rollingMode(containers []corev1.Container, g *pluginGroup) bool {
	if g == nil {
		return false
	}
	for _, c := range containers {
		if !slices.Contains(g.plugin.Containers, c.Name) {
			continue
		}
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if strings.HasPrefix(a, "-") && name == "rolling-update" && value != "" {
				return true
			}
		}
	}
	return false
}

// kubeletPaths reads (once per node) the kubelet's metric and returns the
// driver's paths; nil when it could not be read (Report.Unknown says why).
func (p *prober) kubeletPaths(ctx context.Context, t *kubeletTask) *KubeletPaths {
	m := p.nodeMetrics(ctx, t.nodeOf)
	if m.err != "" {
		return nil
	}
	v := m.state.Driver(t.driverName)
	latest := v.Latest(t.driverName)
	return &KubeletPaths{Actual: len(v.Actual), Retired: v.Retired(latest), Latest: latest, DesiredOnly: v.DesiredOnly}
}

// applyKubelet records the kubelet's paths on the node, and warns of what
// the handover does not expect.
func applyKubelet(r *Report, t kubeletTask, k *KubeletPaths) {
	d := &r.Drivers[t.driver]
	n := &d.Nodes[t.node]
	n.Kubelet = k
	d.KubeletRetired += k.Retired
	if k.Retired >= kubeletplugins.RetiredWarn {
		n.Warnings = append(n.Warnings, fmt.Sprintf("the kubelet holds %d retired registration paths of the driver: %s",
			k.Retired, kubeletplugins.Advice))
	}
	if !t.mode && k.Retired > 0 {
		n.Warnings = append(n.Warnings, fmt.Sprintf("the kubelet holds %d registration paths of the driver besides %s, and its registrar does not run the handover (--rolling-update): a kubelet restart clears them",
			k.Retired, path.Base(k.Latest)))
	}
	if t.mode && t.ready && k.Actual == 0 {
		n.Warnings = append(n.Warnings, "the kubelet holds no registration path of the driver while a handover instance is ready (registered, as it was told): the kubelet unregistered the driver, which the handover does not expect (a registrar hears nothing of a deregistration; one that sees its socket removed serves it again); if it stays, run csi-registrar doctor in the pod (kubectl exec), then delete the pod so that its successor registers again")
	}
	if dead := stuck(t.driverName, k); len(dead) > 0 {
		n.Warnings = append(n.Warnings, fmt.Sprintf("the kubelet dialed %s and never registered it (desired state only): it redials it every ~2 minutes until it restarts; a kubelet restart clears it",
			strings.Join(dead, ", ")))
	}
}

// stuck are the desired-only paths other than the newest announcement
// (which the kubelet may be registering right now).
func stuck(driver string, k *KubeletPaths) []string {
	newest, best := "", uint64(0)
	for _, sock := range append([]string{k.Latest}, k.DesiredOnly...) {
		if _, v, ok := csiplugin.ParseRollingUpdateSocketName(driver, path.Base(sock)); ok && v > best {
			newest, best = sock, v
		}
	}
	var out []string
	for _, sock := range k.DesiredOnly {
		if sock != newest {
			out = append(out, path.Base(sock))
		}
	}
	return out
}

// kubeletText is the node's kubelet paths for the wide table's reason.
func kubeletText(k *KubeletPaths) string {
	if k == nil {
		return ""
	}
	s := fmt.Sprintf("kubelet: %d registration path(s) in its actual state, %d retired", k.Actual, k.Retired)
	if k.Retired > 0 {
		s += " (a kubelet restart clears them)"
	}
	if len(k.DesiredOnly) > 0 {
		s += fmt.Sprintf(", %d desired only", len(k.DesiredOnly))
	}
	return s
}
