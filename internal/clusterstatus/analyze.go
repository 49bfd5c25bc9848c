package clusterstatus

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// probeTask is a node that is not registered and whose reason a proxy call
// can tell more of: the registrar's /readyz, or the kubelet's metric and
// the pod's events.
type probeTask struct {
	driver, node int // indexes into Report.Drivers and Driver.Nodes
	driverName   string
	pod          *corev1.Pod
	group        *pluginGroup
}

// nodeFacts is what the kubelet wrote for one node.
type nodeFacts struct {
	node          *corev1.Node
	entries       map[string]storagev1.CSINodeDriver // CSINode spec.drivers by name
	annotation    map[string]string                  // the node ID annotation, parsed
	badAnnotation string                             // why the annotation does not parse
}

// analyze computes the report from a snapshot, without API calls, and
// returns the nodes a proxy call could tell more about. driver, if not
// empty, limits the report to that driver.
func analyze(snap *Snapshot, driver string) (*Report, []probeTask) {
	r := &Report{SchemaVersion: SchemaVersion, Unknown: snap.Unknown}

	// The nodes, by name: the Node objects, else what names them.
	facts := map[string]*nodeFacts{}
	var names []string
	fact := func(name string) *nodeFacts {
		f := facts[name]
		if f == nil {
			f = &nodeFacts{entries: map[string]storagev1.CSINodeDriver{}}
			facts[name] = f
			names = append(names, name)
		}
		return f
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		f := fact(n.Name)
		f.node = n
		var err error
		if f.annotation, err = csiplugin.ParseNodeIDAnnotation(n.Annotations[csiplugin.NodeIDAnnotation]); err != nil {
			f.badAnnotation = "the Node's " + err.Error()
		}
	}
	for i := range snap.CSINodes {
		c := &snap.CSINodes[i]
		if len(snap.Nodes) > 0 && facts[c.Name] == nil {
			continue // its Node is gone; the garbage collector removes it
		}
		f := fact(c.Name)
		for _, d := range c.Spec.Drivers {
			f.entries[d.Name] = d
		}
	}
	sort.Strings(names)
	r.Nodes = len(snap.Nodes)

	// The drivers the cluster knows of.
	known := map[string]bool{}
	csiDriver := map[string]bool{}
	for _, d := range snap.CSIDrivers {
		known[d.Name], csiDriver[d.Name] = true, true
	}
	entries := map[string]map[string]bool{} // node -> drivers in its CSINode
	for name, f := range facts {
		entries[name] = map[string]bool{}
		for d := range f.entries {
			known[d], entries[name][d] = true, true
		}
		for d := range f.annotation {
			known[d] = true
		}
	}
	groups := groupPlugins(snap)
	identify(groups, known, entries)
	groupsOf := map[string][]*pluginGroup{}
	for _, g := range groups {
		for _, d := range g.drivers {
			groupsOf[d] = append(groupsOf[d], g)
		}
	}

	var driverNames []string
	for d := range known {
		if driver == "" || d == driver {
			driverNames = append(driverNames, d)
		}
	}
	sort.Strings(driverNames)
	var tasks []probeTask
	for _, name := range driverNames {
		d := Driver{Name: name, CSIDriverObject: csiDriver[name]}
		gs := groupsOf[name]
		for _, g := range gs {
			d.NodePlugins = append(d.NodePlugins, g.key)
			if d.Registrar == "" {
				d.Registrar = g.registrar
			}
		}
		dp := indexPlugins(gs)
		for _, nodeName := range names {
			n, expected, task := nodeState(name, nodeName, facts[nodeName], dp, snap.Missing)
			if n.State == StateNotExpected && len(snap.Nodes) == 0 {
				continue
			}
			if task != nil {
				task.driver, task.node, task.driverName = len(r.Drivers), len(d.Nodes), name
				tasks = append(tasks, *task)
			}
			if kt, ok := kubeletTaskOf(name, n, dp); ok {
				kt.driver, kt.node = len(r.Drivers), len(d.Nodes)
				r.kubelet = append(r.kubelet, kt)
			}
			d.count(n, expected)
			d.Nodes = append(d.Nodes, n)
		}
		d.judge(snap)
		r.Drivers = append(r.Drivers, d)
	}
	// Node plugins whose driver could not be told.
	for _, g := range groups {
		if len(g.drivers) > 0 || (driver != "") {
			continue
		}
		d := Driver{Name: "", NodePlugins: []string{g.key}, Registrar: g.registrar,
			Problem: "its driver is not known: no known driver name appears in its pod spec, and the CSINodes of its nodes list no driver that no other node plugin runs"}
		r.Drivers = append(r.Drivers, d)
	}
	if driver != "" && len(r.Drivers) == 0 {
		r.Drivers = append(r.Drivers, Driver{Name: driver,
			Problem: "not known to the cluster: no CSIDriver object, no CSINode entry, no Node annotation and no node plugin pod names it"})
	}
	return r, tasks
}

// count adds a node to the driver's counts.
func (d *Driver) count(n Node, expected bool) {
	if expected {
		d.Expected++
	}
	switch n.State {
	case StateRegistered:
		d.Registered++
	case StateNotRegistered:
		d.NotRegistered++
	case StateStale:
		d.Stale++
	}
	if n.Conflict != "" {
		d.Conflicts++
	}
	if n.Overlap != "" {
		d.Overlapping++
	}
}

// driverPlugins indexes the node plugins of one driver.
type driverPlugins struct {
	groups  []*pluginGroup
	pods    map[string]*corev1.Pod // by node: bound there, or a DaemonSet pod meant for it
	groupOf map[*corev1.Pod]*pluginGroup
	// onNode are all the pods by node that have not ended (overlapOf).
	onNode map[string][]*corev1.Pod
}

func indexPlugins(gs []*pluginGroup) *driverPlugins {
	dp := &driverPlugins{groups: gs, pods: map[string]*corev1.Pod{}, groupOf: map[*corev1.Pod]*pluginGroup{},
		onNode: map[string][]*corev1.Pod{}}
	for _, g := range gs {
		for _, p := range g.pods {
			dp.groupOf[p] = g
			node := podNode(p)
			if node == "" {
				continue
			}
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				dp.onNode[node] = append(dp.onNode[node], p)
			}
			// Prefer a pod that is not being deleted, then the newest (the
			// new pod of a rollout).
			found := dp.pods[node]
			switch {
			case found == nil,
				found.DeletionTimestamp != nil && p.DeletionTimestamp == nil,
				(found.DeletionTimestamp == nil) == (p.DeletionTimestamp == nil) && found.CreationTimestamp.Before(&p.CreationTimestamp):
				dp.pods[node] = p
			}
		}
	}
	return dp
}

// wantedBy returns the DaemonSet group that wants a pod on the node.
func (dp *driverPlugins) wantedBy(f *nodeFacts) *pluginGroup {
	if f.node == nil {
		return nil
	}
	for _, g := range dp.groups {
		if g.ds != nil && daemonSetWants(g.ds, f.node) {
			return g
		}
	}
	return nil
}

// nodeState is one node's state for one driver, and the probe that could
// tell more when it is not registered.
func nodeState(driver, nodeName string, f *nodeFacts, dp *driverPlugins, missing map[string]bool) (n Node, expected bool, task *probeTask) {
	n, task = nodeStateOf(driver, nodeName, f, dp, missing)
	n.Overlap, n.Conflict = overlapOf(dp.onNode[nodeName], dp.groupOf)
	if pod := dp.pods[nodeName]; pod != nil && dp.groupOf[pod] != nil && dp.groupOf[pod].nodeCondition != "" && f.node != nil {
		n.Condition = nodeCondition(f.node, dp.groupOf[pod].nodeCondition)
		if n.State == StateRegistered && n.Condition.Status != string(corev1.ConditionTrue) {
			n.Warnings = append(n.Warnings, "the Node condition "+n.Condition.Type+" is "+conditionText(n.Condition)+
				", not True: pods kept off until it is True (a Node Readiness Controller rule on it) stay off")
		}
	}
	return n, n.Pod != "" || (n.State != StateNotExpected && dp.wantedBy(f) != nil), task
}

func nodeStateOf(driver, nodeName string, f *nodeFacts, dp *driverPlugins, missing map[string]bool) (Node, *probeTask) {
	n := Node{Name: nodeName}
	entry, hasEntry := f.entries[driver]
	annID, hasAnn := f.annotation[driver]
	pod := dp.pods[nodeName]
	if pod != nil {
		n.Pod = pod.Namespace + "/" + pod.Name
	}
	reg := csiplugin.Registration{InCSINode: hasEntry, CSINodeID: entry.NodeID, Annotated: hasAnn, AnnotationID: annID}
	registered := reg.Registered()

	if pod == nil {
		switch {
		case missing["pods"] || missing["daemonsets"]:
			if registered {
				n.State = StateRegistered
			} else {
				n.State, n.Reason = StateUnknown, "the node plugin pods could not be listed"
			}
		case hasEntry || hasAnn:
			n.State = StateStale
			n.Reason = "no node plugin pod of the driver on the node, yet " + leftovers(driver, hasEntry, hasAnn)
			if g := dp.wantedBy(f); g != nil {
				n.Reason += "; " + g.key + " wants a pod here: pod missing"
			}
		case dp.wantedBy(f) != nil:
			n.State = StateNotRegistered
			n.Reason = "pod missing: " + dp.wantedBy(f).key + " wants a pod here, there is none"
		default:
			n.State = StateNotExpected
		}
		return n, nil
	}
	if registered {
		n.State = StateRegistered
		n.Warnings = topologyWarnings(f.node, entry)
		return n, nil
	}
	n.State = StateNotRegistered
	var why []string
	if r := podProblem(pod, dp.groupOf[pod]); r != "" {
		why = append(why, r)
	}
	why = append(why, registrationProblem(f, reg))
	n.Reason = strings.Join(why, "; ")
	if pod.Spec.NodeName == "" {
		return n, nil // nothing runs yet to ask
	}
	return n, &probeTask{pod: pod, group: dp.groupOf[pod]}
}

// nodeCondition is the Node's condition of type t.
func nodeCondition(n *corev1.Node, t string) *Condition {
	c := &Condition{Type: t}
	for _, nc := range n.Status.Conditions {
		if string(nc.Type) == t {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = string(nc.Status), nc.Reason, nc.Message, nc.LastTransitionTime.Time
		}
	}
	return c
}

// conditionText is "True (Registered)", "False (KubeletRejected)", or
// "absent".
func conditionText(c *Condition) string {
	switch {
	case c.Status == "":
		return "absent"
	case c.Reason != "":
		return c.Status + " (" + c.Reason + ")"
	}
	return c.Status
}

// leftovers names what the kubelet left of a registration.
func leftovers(driver string, hasEntry, hasAnn bool) string {
	switch {
	case hasEntry && hasAnn:
		return "the CSINode lists it and the Node's annotation " + csiplugin.NodeIDAnnotation + " names it"
	case hasEntry:
		return "the CSINode lists it"
	}
	return "the Node's annotation " + csiplugin.NodeIDAnnotation + " names it"
}

// registrationProblem says what the kubelet wrote, and what is missing.
func registrationProblem(f *nodeFacts, reg csiplugin.Registration) string {
	if f.badAnnotation != "" && reg.InCSINode {
		return "CSINode entry with node ID " + reg.CSINodeID + ", but " + f.badAnnotation
	}
	return reg.Problem()
}

// podProblem says what keeps the pod from running ready, "" if nothing.
func podProblem(pod *corev1.Pod, g *pluginGroup) string {
	name := "pod " + pod.Namespace + "/" + pod.Name
	switch {
	case pod.Spec.NodeName == "":
		msg := name + " not scheduled"
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Message != "" {
				msg += ": " + c.Message
			}
		}
		return msg
	case pod.DeletionTimestamp != nil:
		return name + " terminating"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return name + " " + strings.ToLower(string(pod.Status.Phase))
	case podReady(pod):
		return ""
	}
	// The registering containers first: they tell most.
	var registering []string
	if g != nil {
		registering = g.plugin.Containers
	}
	statuses := append([]corev1.ContainerStatus{}, pod.Status.ContainerStatuses...)
	sort.SliceStable(statuses, func(i, j int) bool {
		return slices.Contains(registering, statuses[i].Name) && !slices.Contains(registering, statuses[j].Name)
	})
	for _, cs := range statuses {
		switch {
		case cs.State.Waiting != nil:
			msg := fmt.Sprintf("%s not ready: container %s waiting: %s", name, cs.Name, cs.State.Waiting.Reason)
			if t := cs.LastTerminationState.Terminated; t != nil && t.Message != "" {
				msg += " (last exit: " + strings.TrimSpace(t.Message) + ")"
			}
			return msg
		case cs.State.Terminated != nil:
			return fmt.Sprintf("%s not ready: container %s terminated: %s", name, cs.Name, cs.State.Terminated.Reason)
		case !cs.Ready:
			return fmt.Sprintf("%s not ready: container %s running, not ready", name, cs.Name)
		}
	}
	return name + " not ready (" + string(pod.Status.Phase) + ")"
}

// topologyWarnings names the topology keys of a registered driver that the
// Node does not carry as labels.
func topologyWarnings(node *corev1.Node, entry storagev1.CSINodeDriver) []string {
	if node == nil {
		return nil
	}
	var w []string
	for _, k := range entry.TopologyKeys {
		if _, ok := node.Labels[k]; !ok {
			w = append(w, "topology key "+k+" (CSINode) is not a label of the Node")
		}
	}
	return w
}
