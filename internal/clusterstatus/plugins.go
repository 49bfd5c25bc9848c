package clusterstatus

import (
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/nodeplugin"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Registrar kinds, as Driver.Registrar names them.
const (
	registrarCSIRegistrar = "csi-registrar"
	registrarInProcess    = "csi-registrar (in-process)"
	registrarUpstream     = "node-driver-registrar"
)

// pluginGroup is one node plugin: the pods of one controller (a DaemonSet,
// StatefulSet, ...) or one pod without a controller.
type pluginGroup struct {
	key       string // "DaemonSet ns/name", "Pod ns/name"
	spec      *corev1.PodSpec
	plugin    nodeplugin.Plugin
	ds        *appsv1.DaemonSet // nil unless a DaemonSet
	pods      []*corev1.Pod
	drivers   []string // the drivers it runs, identified by identify
	registrar string   // registrarCSIRegistrar, ...
	// readyzPort is the port of the csi-registrar container's
	// --http-endpoint, "" when it has none (or is not csi-registrar).
	readyzPort string
	// nodeCondition is the csi-registrar container's --node-condition,
	// the Node condition it writes; "" when it writes none.
	nodeCondition string
}

// groupPlugins gathers the node plugin pods and the node plugin DaemonSets
// (a DaemonSet whose pods are all missing is a node plugin too) into groups.
func groupPlugins(snap *Snapshot) []*pluginGroup {
	byKey := map[string]*pluginGroup{}
	var keys []string
	add := func(key string, spec *corev1.PodSpec, p nodeplugin.Plugin) *pluginGroup {
		g := byKey[key]
		if g == nil {
			g = &pluginGroup{key: key, spec: spec, plugin: p}
			g.registrar, g.readyzPort, g.nodeCondition = registrarOf(spec, p)
			byKey[key] = g
			keys = append(keys, key)
		}
		return g
	}
	for i := range snap.DaemonSets {
		ds := &snap.DaemonSets[i]
		p, ok := nodeplugin.RecognizeSpec(&ds.Spec.Template.Spec)
		if !ok {
			continue
		}
		add("DaemonSet "+ds.Namespace+"/"+ds.Name, &ds.Spec.Template.Spec, p).ds = ds
	}
	for i := range snap.Pods {
		pod := &snap.Pods[i]
		p, ok := nodeplugin.Recognize(pod)
		if !ok {
			continue
		}
		key := "Pod " + pod.Namespace + "/" + pod.Name
		if p.Owner != nil {
			key = p.Owner.Kind + " " + pod.Namespace + "/" + p.Owner.Name
		}
		g := add(key, &pod.Spec, p)
		g.pods = append(g.pods, pod)
	}
	sort.Strings(keys)
	groups := make([]*pluginGroup, len(keys))
	for i, k := range keys {
		groups[i] = byKey[k]
	}
	return groups
}

// registrarOf tells which registrar the containers that mount the
// registration directory run, csi-registrar's HTTP port and the Node
// condition it writes.
func registrarOf(spec *corev1.PodSpec, p nodeplugin.Plugin) (kind, port, condition string) {
	kind = "other"
	for _, c := range spec.Containers {
		if !slices.Contains(p.Containers, c.Name) {
			continue
		}
		image := imageName(c.Image)
		cmd := ""
		if len(c.Command) > 0 {
			cmd = path.Base(c.Command[0])
		}
		switch {
		case image == "csi-registrar" || cmd == "csi-registrar":
			kind = registrarCSIRegistrar
			if slices.Contains(c.Command, "driver") || (len(c.Args) > 0 && c.Args[0] == "driver") {
				kind = registrarInProcess
			}
			return kind, httpPort(c), flagValue(c, "--node-condition")
		case image == "csi-node-driver-registrar":
			kind = registrarUpstream
		default:
			if kind == "other" && image != "" {
				kind = "other (" + image + ")"
			}
		}
	}
	return kind, "", ""
}

// imageName is the last path element of an image reference, without tag
// or digest: "csi-node-driver-registrar" for
// registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	name := path.Base(ref)
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name = name[:i]
	}
	return name
}

// httpPort is the port of a csi-registrar container's --http-endpoint.
func httpPort(c corev1.Container) string {
	args := append(append([]string{}, c.Command...), c.Args...)
	for i, a := range args {
		var v string
		switch {
		case strings.HasPrefix(a, "--http-endpoint="):
			v = strings.TrimPrefix(a, "--http-endpoint=")
		case a == "--http-endpoint" && i+1 < len(args):
			v = args[i+1]
		default:
			continue
		}
		if i := strings.LastIndex(v, ":"); i >= 0 && v[i+1:] != "" {
			return v[i+1:]
		}
	}
	return ""
}

// flagValue is the value of a container's flag (--name=value or --name
// value in its command or args), "" when it is not set.
func flagValue(c corev1.Container, name string) string {
	args := append(append([]string{}, c.Command...), c.Args...)
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// identify assigns drivers to groups. First by name: a known driver name
// that is a word of the group's spec (an argument such as
// --kubelet-registration-path=/var/lib/kubelet/plugins/<driver>/csi.sock,
// an environment value, a hostPath). Then, for a group whose spec names no
// known driver, by its nodes: the one driver, claimed by no other group,
// that the CSINodes of all the nodes where its pods are ready list.
func identify(groups []*pluginGroup, known map[string]bool, entries map[string]map[string]bool) {
	claimed := map[string]bool{}
	for _, g := range groups {
		words := specWords(g.spec)
		for name := range known {
			if words[name] {
				g.drivers = append(g.drivers, name)
				claimed[name] = true
			}
		}
		sort.Strings(g.drivers)
	}
	for _, g := range groups {
		if len(g.drivers) > 0 {
			continue
		}
		var common map[string]bool
		for _, pod := range g.pods {
			if pod.Spec.NodeName == "" || !podReady(pod) {
				continue
			}
			onNode := entries[pod.Spec.NodeName]
			if common == nil {
				common = map[string]bool{}
				for d := range onNode {
					common[d] = true
				}
				continue
			}
			for d := range common {
				if !onNode[d] {
					delete(common, d)
				}
			}
		}
		var candidates []string
		for d := range common {
			if !claimed[d] {
				candidates = append(candidates, d)
			}
		}
		if len(candidates) == 1 {
			g.drivers = candidates
			claimed[candidates[0]] = true
		}
	}
}

// specWords are the words of a pod spec's commands, arguments,
// environment values and hostPaths, split at characters a driver name
// cannot hold.
func specWords(spec *corev1.PodSpec) map[string]bool {
	words := map[string]bool{}
	addText := func(s string) {
		for _, w := range strings.FieldsFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
		}) {
			words[w] = true
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, s := range c.Command {
				addText(s)
			}
			for _, s := range c.Args {
				addText(s)
			}
			for _, e := range c.Env {
				addText(e.Value)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			addText(v.HostPath.Path)
		}
	}
	return words
}

// daemonSetTolerations are the tolerations the DaemonSet controller adds to
// every DaemonSet pod (pkg/controller/daemon/util).
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// daemonSetWants reports whether the DaemonSet controller places a pod of
// ds on node: its node selector and required node affinity match, and it
// tolerates the node's NoSchedule and NoExecute taints.
func daemonSetWants(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	spec := &ds.Spec.Template.Spec
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec}).Match(node); err != nil || !ok {
		return false
	}
	tolerations := append(append([]corev1.Toleration{}, spec.Tolerations...), daemonSetTolerations...)
	if spec.HostNetwork {
		tolerations = append(tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// podNode is the node a pod runs on or, for a DaemonSet pod the scheduler
// has not bound yet, the node its affinity names.
func podNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
