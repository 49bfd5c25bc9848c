package clusterstatus

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The objects below are shaped as the API server returns them for
// manifests/ (csi-registrar as a sidecar), upstream's node-driver-registrar
// and a driver that registers in-process.

const stub = "stub.csi.example.com"

func node(name string, labels map[string]string, annotation string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if annotation != "" {
		n.Annotations = map[string]string{"csi.volume.kubernetes.io/nodeid": annotation}
	}
	return n
}

func csiNode(name string, drivers ...storagev1.CSINodeDriver) storagev1.CSINode {
	return storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func pluginSpec(image, driver string, extraArgs ...string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers: []corev1.Container{
			{Name: "driver", Image: "example/driver:v1", Args: []string{"--endpoint=unix:///csi/csi.sock"},
				VolumeMounts: []corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"}}},
			{Name: "registrar", Image: image,
				Args: append([]string{"--csi-address=/csi/csi.sock", "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)"}, extraArgs...),
				Env:  []corev1.EnvVar{{Name: "DRIVER_REG_SOCK_PATH", Value: "/var/lib/kubelet/plugins/" + driver + "/csi.sock"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"},
					{Name: "registration-dir", MountPath: "/registration"}}},
		},
		Volumes: []corev1.Volume{
			{Name: "socket-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/plugins/" + driver}}},
			{Name: "registration-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/plugins_registry/"}}},
		},
	}
}

func daemonSet(ns, name string, spec corev1.PodSpec) appsv1.DaemonSet {
	return appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("ds-uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
}

func podOf(ds appsv1.DaemonSet, nodeName string, ready bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: ds.Name + "-" + nodeName, UID: types.UID("pod-uid-" + ds.Name + nodeName),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}}},
		Spec: *ds.Spec.Template.Spec.DeepCopy()}
	p.Spec.NodeName = nodeName
	p.Status.Phase = corev1.PodRunning
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	return p
}

func nodeOf(t *testing.T, r *Report, driver, name string) Node {
	t.Helper()
	for _, d := range r.Drivers {
		if d.Name != driver {
			continue
		}
		for _, n := range d.Nodes {
			if n.Name == name {
				return n
			}
		}
	}
	t.Fatalf("no node %s for driver %q in %+v", name, driver, r.Drivers)
	return Node{}
}

func driverOf(t *testing.T, r *Report, name string) Driver {
	t.Helper()
	for _, d := range r.Drivers {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no driver %q in %+v", name, r.Drivers)
	return Driver{}
}

// TestAnalyze: three nodes, like kind's; the DaemonSet's nodeSelector
// excludes node-3. node-1 registered, node-2's pod not ready and nothing
// registered, node-3 not expected; an entry planted for a driver without
// node plugin is stale.
func TestAnalyze(t *testing.T) {
	linux := map[string]string{"kubernetes.io/os": "linux", "topology.stub.csi.example.com/zone": "zone-a"}
	ds := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub, "--http-endpoint=:9809"))
	ds.Spec.Template.Spec.NodeSelector["pool"] = "storage"
	storage := map[string]string{"kubernetes.io/os": "linux", "pool": "storage", "topology.stub.csi.example.com/zone": "zone-a"}
	snap := &Snapshot{
		Nodes: []corev1.Node{
			node("node-1", storage, `{"stub.csi.example.com":"node-1"}`),
			node("node-2", storage, ""),
			node("node-3", linux, `{"gone.csi.example.com":"node-3"}`),
		},
		CSINodes: []storagev1.CSINode{
			csiNode("node-1", storagev1.CSINodeDriver{Name: stub, NodeID: "node-1", TopologyKeys: []string{"topology.stub.csi.example.com/zone"}}),
			csiNode("node-2"),
			csiNode("node-3", storagev1.CSINodeDriver{Name: "gone.csi.example.com", NodeID: "node-3"}),
		},
		CSIDrivers: []storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: stub}}},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "node-1", true), podOf(ds, "node-2", false)},
	}
	r, tasks := analyze(snap, "")
	d := driverOf(t, r, stub)
	if d.Expected != 2 || d.Registered != 1 || d.NotRegistered != 1 || d.Stale != 0 || !d.CSIDriverObject {
		t.Errorf("stub: %+v, want expected 2, registered 1, not registered 1, stale 0, a CSIDriver", d)
	}
	if d.Registrar != registrarCSIRegistrar || len(d.NodePlugins) != 1 || d.NodePlugins[0] != "DaemonSet csi-registrar/csi-stub-node" {
		t.Errorf("stub: registrar %q, plugins %v", d.Registrar, d.NodePlugins)
	}
	if n := nodeOf(t, r, stub, "node-2"); n.State != StateNotRegistered || !strings.Contains(n.Reason, "container registrar running, not ready") ||
		!strings.Contains(n.Reason, "no CSINode entry, no Node annotation") || n.Pod != "csi-registrar/csi-stub-node-node-2" {
		t.Errorf("node-2: %+v", n)
	}
	if n := nodeOf(t, r, stub, "node-3"); n.State != StateNotExpected {
		t.Errorf("node-3: %+v, want not expected", n)
	}
	gone := driverOf(t, r, "gone.csi.example.com")
	if gone.Stale != 1 || gone.Expected != 0 || gone.Healthy() {
		t.Errorf("gone: %+v, want 1 stale, unhealthy", gone)
	}
	if n := nodeOf(t, r, "gone.csi.example.com", "node-3"); n.State != StateStale || !strings.Contains(n.Reason, "the CSINode lists it and the Node's annotation") {
		t.Errorf("gone on node-3: %+v", n)
	}
	if r.ExitCode() != ExitUnhealthy {
		t.Errorf("exit code %d, want %d", r.ExitCode(), ExitUnhealthy)
	}
	if len(tasks) != 1 || tasks[0].pod.Spec.NodeName != "node-2" || tasks[0].group.readyzPort != "9809" {
		t.Errorf("probe tasks: %+v, want one for node-2 on port 9809", tasks)
	}

	// Only the registered driver, asked by name: healthy.
	snap.Pods[1] = podOf(ds, "node-2", true)
	snap.Nodes[1] = node("node-2", storage, `{"stub.csi.example.com":"node-2"}`)
	snap.CSINodes[1] = csiNode("node-2", storagev1.CSINodeDriver{Name: stub, NodeID: "node-2"})
	r, _ = analyze(snap, stub)
	if len(r.Drivers) != 1 || r.ExitCode() != ExitHealthy {
		t.Errorf("%s alone: %+v, exit %d; want one healthy driver", stub, r.Drivers, r.ExitCode())
	}
	// A driver nobody knows of.
	r, _ = analyze(snap, "nobody.example.com")
	if len(r.Drivers) != 1 || !strings.Contains(r.Drivers[0].Problem, "not known") || r.ExitCode() != ExitUnhealthy {
		t.Errorf("unknown driver: %+v", r.Drivers)
	}
}

// TestAnalyzeDisagreement: the CSINode and the annotation disagree, and a
// topology key is missing from the Node's labels.
func TestAnalyzeDisagreement(t *testing.T) {
	ds := daemonSet("kube-system", "plugin", pluginSpec("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0", stub))
	snap := &Snapshot{
		Nodes: []corev1.Node{node("a", nil, `{"stub.csi.example.com":"other"}`), node("b", nil, `{"stub.csi.example.com":"b"}`)},
		CSINodes: []storagev1.CSINode{csiNode("a", storagev1.CSINodeDriver{Name: stub, NodeID: "a"}),
			csiNode("b", storagev1.CSINodeDriver{Name: stub, NodeID: "b", TopologyKeys: []string{"zone"}})},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "a", true), podOf(ds, "b", true)},
	}
	snap.DaemonSets[0].Spec.Template.Spec.NodeSelector = nil
	r, tasks := analyze(snap, "")
	if n := nodeOf(t, r, stub, "a"); n.State != StateNotRegistered || !strings.Contains(n.Reason, `disagree: node ID "a" vs "other"`) {
		t.Errorf("a: %+v", n)
	}
	if n := nodeOf(t, r, stub, "b"); n.State != StateRegistered || len(n.Warnings) != 1 || !strings.Contains(n.Warnings[0], "topology key zone") {
		t.Errorf("b: %+v", n)
	}
	if d := driverOf(t, r, stub); d.Registrar != registrarUpstream {
		t.Errorf("registrar %q, want %q", d.Registrar, registrarUpstream)
	}
	if len(tasks) != 1 || tasks[0].group.readyzPort != "" {
		t.Errorf("tasks %+v: want one, without a /readyz port (upstream has none)", tasks)
	}
}

// TestIdentifyByNodes: a node plugin whose spec does not name its driver
// is identified by the driver its nodes' CSINodes list; a DaemonSet pod the
// scheduler has not bound yet counts for the node its affinity names.
func TestIdentifyByNodes(t *testing.T) {
	spec := pluginSpec("example/custom-registrar:v1", "csi-hostpath")
	ds := daemonSet("default", "hostpath", spec)
	pending := podOf(ds, "", false)
	pending.Name = "hostpath-pending"
	pending.Status.Phase = corev1.PodPending
	pending.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"y"}}}}}}}}
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/2 nodes are available"}}
	snap := &Snapshot{
		Nodes:      []corev1.Node{node("x", map[string]string{"kubernetes.io/os": "linux"}, `{"hostpath.csi.k8s.io":"x"}`), node("y", map[string]string{"kubernetes.io/os": "linux"}, "")},
		CSINodes:   []storagev1.CSINode{csiNode("x", storagev1.CSINodeDriver{Name: "hostpath.csi.k8s.io", NodeID: "x"}), csiNode("y")},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "x", true), pending},
	}
	r, _ := analyze(snap, "")
	d := driverOf(t, r, "hostpath.csi.k8s.io")
	if d.Registered != 1 || d.NotRegistered != 1 || d.Registrar != "other (custom-registrar)" {
		t.Errorf("%+v", d)
	}
	if n := nodeOf(t, r, "hostpath.csi.k8s.io", "y"); !strings.Contains(n.Reason, "not scheduled: 0/2 nodes are available") {
		t.Errorf("y: %+v", n)
	}
}

// TestDaemonSetWants: node selection as the DaemonSet controller does it.
func TestDaemonSetWants(t *testing.T) {
	ds := daemonSet("ns", "d", corev1.PodSpec{NodeSelector: map[string]string{"os": "linux"}})
	tainted := node("t", map[string]string{"os": "linux"}, "")
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	notReady := node("n", map[string]string{"os": "linux"}, "")
	notReady.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}
	for _, tc := range []struct {
		node corev1.Node
		want bool
	}{
		{node("l", map[string]string{"os": "linux"}, ""), true},
		{node("w", map[string]string{"os": "windows"}, ""), false},
		{tainted, false},
		{notReady, true}, // the controller's own tolerations
	} {
		if got := daemonSetWants(&ds, &tc.node); got != tc.want {
			t.Errorf("node %s: %v, want %v", tc.node.Name, got, tc.want)
		}
	}
}

// TestAnalyzeNodeCondition: a csi-registrar with --node-condition: each
// node's row carries the condition as the Node holds it; a registered node
// whose condition is not True (absent, or False) has a warning; without
// the flag, no condition.
func TestAnalyzeNodeCondition(t *testing.T) {
	const cond = "stub.csi.example.com/NodePluginRegistered"
	ds := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub, "--node-condition="+cond))
	at := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	withCondition := func(n corev1.Node, status corev1.ConditionStatus, reason string) corev1.Node {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: cond, Status: status, Reason: reason, LastTransitionTime: at}}
		return n
	}
	snap := &Snapshot{
		Nodes: []corev1.Node{
			withCondition(node("a", nil, `{"stub.csi.example.com":"a"}`), corev1.ConditionTrue, "DriverRegistered"),
			withCondition(node("b", nil, `{"stub.csi.example.com":"b"}`), corev1.ConditionFalse, "DriverNotAnswering"),
			node("c", nil, `{"stub.csi.example.com":"c"}`),
		},
		CSINodes: []storagev1.CSINode{csiNode("a", storagev1.CSINodeDriver{Name: stub, NodeID: "a"}),
			csiNode("b", storagev1.CSINodeDriver{Name: stub, NodeID: "b"}), csiNode("c", storagev1.CSINodeDriver{Name: stub, NodeID: "c"})},
		DaemonSets: []appsv1.DaemonSet{ds},
		Pods:       []corev1.Pod{podOf(ds, "a", true), podOf(ds, "b", true), podOf(ds, "c", true)},
	}
	snap.DaemonSets[0].Spec.Template.Spec.NodeSelector = nil
	r, _ := analyze(snap, "")
	for name, want := range map[string]struct {
		status, text string
		warn         bool
	}{"a": {"True", "True (DriverRegistered)", false}, "b": {"False", "False (DriverNotAnswering)", true}, "c": {"", "absent", true}} {
		n := nodeOf(t, r, stub, name)
		if n.State != StateRegistered || n.Condition == nil || n.Condition.Type != cond || n.Condition.Status != want.status {
			t.Errorf("%s: %+v, condition %+v; want registered, %s %q", name, n, n.Condition, cond, want.status)
			continue
		}
		if want.status != "" && !n.Condition.LastTransitionTime.Equal(at.Time) {
			t.Errorf("%s: lastTransitionTime %s, want %s", name, n.Condition.LastTransitionTime, at)
		}
		warned := len(n.Warnings) == 1 && strings.Contains(n.Warnings[0], cond+" is "+want.text+", not True")
		if warned != want.warn {
			t.Errorf("%s: warnings %q; want a warning naming %s %s: %v", name, n.Warnings, cond, want.text, want.warn)
		}
	}
	_, rows := tableRows(r, true)
	found := false
	for _, row := range rows {
		found = found || (row[2] == "a" && strings.Contains(row[5], "condition "+cond+": True (DriverRegistered)"))
	}
	if !found {
		t.Errorf("-o wide rows %q: want node a's condition", rows)
	}

	// Without --node-condition: no condition.
	plain := daemonSet("csi-registrar", "csi-stub-node", pluginSpec("csi-registrar:dev", stub))
	snap.DaemonSets = []appsv1.DaemonSet{plain}
	snap.Pods = []corev1.Pod{podOf(plain, "a", true), podOf(plain, "b", true), podOf(plain, "c", true)}
	r, _ = analyze(snap, "")
	if n := nodeOf(t, r, stub, "b"); n.Condition != nil || len(n.Warnings) != 0 {
		t.Errorf("without --node-condition: %+v", n)
	}
}
