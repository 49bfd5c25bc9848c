package clusterstatus

import "strings"

// judge sets the driver's Problem and Warnings, what holds for the driver
// as a whole once its nodes are counted: a driver registered on no node
// because its node plugin runs and is meant to run nowhere is not
// registered (a CSIDriver object alone registers nothing), and a driver
// without a CSIDriver object works with the cluster's defaults only.
func (d *Driver) judge(snap *Snapshot) {
	if !snap.Missing["csidrivers"] && !d.CSIDriverObject {
		d.Warnings = append(d.Warnings, "no CSIDriver object (kubectl get csidriver "+d.Name+
			" returns NotFound): the cluster uses the defaults (attachRequired: true, podInfoOnMount: false) and refuses inline ephemeral volumes of it; apply the driver's CSIDriver object")
	}
	if d.Expected > 0 || d.Registered > 0 || d.NotRegistered > 0 || d.Stale > 0 {
		return
	}
	// Registered nowhere, and nowhere expected: certain only when every
	// kind that could show a node plugin or a node was read.
	for _, kind := range []string{"nodes", "csinodes", "pods", "daemonsets"} {
		if snap.Missing[kind] {
			return
		}
	}
	where := "in any namespace"
	if snap.Namespace != "" {
		where = "in namespace " + snap.Namespace + " (-n)"
	}
	switch {
	case len(snap.Nodes) == 0:
		d.Problem = "not registered on any node: the cluster has no nodes"
	case len(d.NodePlugins) == 0:
		d.Problem = "not registered on any node: no node plugin pod of it runs or is meant to run " + where +
			" (no pod or DaemonSet mounting the kubelet's plugins_registry names it)"
		if d.CSIDriverObject {
			d.Problem += "; its CSIDriver object alone registers nothing: install the driver's node plugin"
		}
	default:
		d.Problem = "not registered on any node: its node plugin (" + strings.Join(d.NodePlugins, ", ") +
			") runs on no node and is meant for none: its node selection, affinity or tolerations exclude every node"
	}
}
