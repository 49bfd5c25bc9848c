package clusterstatus

import "time"

// SchemaVersion names the schema of Report in -o json and -o yaml. Fields
// are only ever added within one version.
const SchemaVersion = "csi-registrar.status/v1"

// State is a node's state for one driver.
type State string

const (
	// StateRegistered: the CSINode has the driver's entry with a node ID,
	// the Node's annotation names the same ID, and a node plugin pod runs there.
	StateRegistered State = "registered"
	// StateNotRegistered: a node plugin pod runs or is meant to run on the
	// node, and the kubelet has not (fully) registered the driver.
	StateNotRegistered State = "not registered"
	// StateStale: the CSINode entry or the annotation names the driver, and
	// no node plugin pod of it is on the node (upstream's issue #83).
	StateStale State = "stale"
	// StateNotExpected: no node plugin pod is meant to run on the node
	// (its DaemonSet's node selection excludes it), and nothing is left there.
	StateNotExpected State = "not expected"
	// StateUnknown: a part of the answer could not be read (see Report.Unknown).
	StateUnknown State = "unknown"
)

// Report is the answer of Status: one entry per CSI driver.
type Report struct {
	SchemaVersion string    `json:"schemaVersion"`
	Time          time.Time `json:"time"`
	Nodes         int       `json:"nodes"` // Nodes in the cluster
	Drivers       []Driver  `json:"drivers"`
	// Unknown lists what could not be read; when not empty the answer is
	// incomplete (exit 3).
	Unknown []Unknown `json:"unknown,omitempty"`

	kubelet []kubeletTask // the nodes whose kubelet state Options.KubeletState reads
}

// Driver is one CSI driver's row.
type Driver struct {
	Name string `json:"name"`
	// CSIDriverObject: a CSIDriver object of this name exists.
	CSIDriverObject bool `json:"csiDriverObject"`
	// NodePlugins are the controllers (or pods, when they have none) of the
	// driver's node plugin pods: "DaemonSet ns/name".
	NodePlugins []string `json:"nodePlugins,omitempty"`
	// Registrar is what registers the driver: csi-registrar, csi-registrar
	// (in-process), node-driver-registrar, or other (the container's image).
	Registrar string `json:"registrar,omitempty"`

	Expected      int `json:"expected"`
	Registered    int `json:"registered"`
	NotRegistered int `json:"notRegistered"`
	Stale         int `json:"stale"`
	// Conflicts counts the nodes where node plugin pods of the driver stay
	// side by side (Node.Conflict).
	Conflicts int `json:"conflicts,omitempty"`
	// Overlapping counts the nodes where a rollout or a replacement of the
	// driver's pods is in progress (Node.Overlap).
	Overlapping int `json:"overlapping,omitempty"`
	// Nodes holds every node that is expected, or has something of the
	// driver, or (with every node listed) is not expected; sorted by name.
	Nodes []Node `json:"nodes"`
	// Problem is a fault of the driver as a whole, e.g. a DRIVER argument
	// the cluster knows nothing of, or a driver registered on no node
	// because its node plugin runs nowhere.
	Problem string `json:"problem,omitempty"`
	// Warnings are faults of the driver as a whole that do not unregister
	// it, e.g. no CSIDriver object.
	Warnings []string `json:"warnings,omitempty"`
	// KubeletRetired is the sum of Node.Kubelet.Retired (Options.KubeletState).
	KubeletRetired int `json:"kubeletRetired,omitempty"`
}

// Healthy reports whether every expected node has the driver registered,
// nothing is stale and no node has two node plugins of the driver that stay.
func (d *Driver) Healthy() bool {
	return d.NotRegistered == 0 && d.Stale == 0 && d.Conflicts == 0 && d.Problem == ""
}

// Node is one node's state for one driver.
type Node struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Pod is the node plugin pod on the node, "namespace/name", if any.
	Pod string `json:"pod,omitempty"`
	// Reason says why the node is not registered or stale, with the
	// evidence (the registrar's /readyz stage, the kubelet's metric, the
	// pod's events).
	Reason string `json:"reason,omitempty"`
	// Warnings are problems that do not unregister the driver, e.g.
	// topology keys the Node lacks as labels.
	Warnings []string `json:"warnings,omitempty"`
	// Overlap says that two pods of the driver on the node are a rollout
	// (or a replacement) in progress, not a conflict: pods of two revisions
	// of one DaemonSet while its status shows the rollout. Pod is then the
	// newest pod not terminating.
	Overlap string `json:"overlap,omitempty"`
	// Conflict says which pods of the driver stay side by side on the
	// node: of two DaemonSets (or other controllers), or of one revision.
	Conflict string `json:"conflict,omitempty"`
	// Kubelet is what the kubelet's plugin manager holds for the driver on
	// the node (Options.KubeletState), nil when not read.
	Kubelet *KubeletPaths `json:"kubelet,omitempty"`
	// Condition is the Node condition the node plugin's csi-registrar
	// writes (its --node-condition) as the Node holds it; nil when it
	// writes none.
	Condition *Condition `json:"condition,omitempty"`
}

// Condition is a Node condition the registrar writes: True once the
// kubelet confirmed the registration and the driver answers.
type Condition struct {
	Type string `json:"type"`
	// Status is True, False or Unknown; "" when the Node has no such
	// condition (not written yet).
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
}

// Unknown is a part of the answer that could not be read.
type Unknown struct {
	// What could not be read, e.g. "pods (all namespaces)" or "/readyz of pod ns/name".
	What string `json:"what"`
	// Permission is the RBAC rule that was missing, when the API server
	// refused: e.g. "list pods" or "get pods/proxy".
	Permission string `json:"permission,omitempty"`
	Error      string `json:"error"`
	// Consequence says what of the answer is unknown because of it.
	Consequence string `json:"consequence"`
}

// Exit codes of the command.
const (
	ExitHealthy    = 0 // every expected node has every driver; nothing stale
	ExitUnhealthy  = 1 // something is not registered or stale
	ExitBadInput   = 2 // bad arguments
	ExitIncomplete = 3 // no failure seen, but a part of the answer is unknown
)

// ExitCode is the command's exit code for r: 1 when a failure was seen
// (a certain answer, even when other parts are unknown), else 3 when a part
// is unknown, else 0.
func (r *Report) ExitCode() int {
	for i := range r.Drivers {
		if !r.Drivers[i].Healthy() {
			return ExitUnhealthy
		}
	}
	if len(r.Unknown) > 0 {
		return ExitIncomplete
	}
	return ExitHealthy
}
