// Package driverspec reads a CSI driver's rendered manifests the way the
// registration e2e suite needs them (`make e2e-driver`): it swaps every
// node-driver-registrar image (and the image of a csi-registrar registrar
// sidecar) for the csi-registrar image under test, leaving
// every other field as written, and learns from the objects what to expect
// from the kubelet: the node plugin workload (a DaemonSet, StatefulSet or
// Deployment whose pod mounts the kubelet's plugins_registry), its registrar
// container (none when the driver registers in-process), the driver name, the
// sockets. Which container is the driver is not guessed here: the suite
// learns it on the node, from the process that listens on the driver's socket.
//
// It works on the rendered YAML only (no cluster, no client-go), so that its
// rules are tested by `make test`.
package driverspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/nodeplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// UpstreamRegistrarSuffix is how the repository of an image that is
// replaced ends: registry.k8s.io/sig-storage/csi-node-driver-registrar, a
// mirror of it, a vendor's rebuild named *node-driver-registrar.
const UpstreamRegistrarSuffix = "node-driver-registrar"

// Swap is one image replaced in the rendered objects.
type Swap struct {
	Kind, Namespace, Name string // the object
	Container             string
	From, To              string // images
	// PullPolicy is the container's imagePullPolicy when it was Always and
	// was set to IfNotPresent (the image under test is on the nodes only, no
	// registry has it); empty when it was left as written.
	PullPolicy string
}

func (s Swap) String() string {
	where := s.Kind + " " + s.Name
	if s.Namespace != "" {
		where = s.Kind + " " + s.Namespace + "/" + s.Name
	}
	out := fmt.Sprintf("%s, container %s: image %s -> %s", where, s.Container, s.From, s.To)
	if s.PullPolicy != "" {
		out += fmt.Sprintf(" (imagePullPolicy %s -> IfNotPresent)", s.PullPolicy)
	}
	return out
}

// Spec is what a driver's manifests say about its node registration.
type Spec struct {
	// Objects are the rendered objects, with the registrar images swapped.
	Objects []map[string]any
	Swaps   []Swap

	// Workload is the node plugin: the one workload (not for Windows nodes)
	// whose pod mounts the kubelet's plugins_registry from the node.
	Workload Workload
	// Namespace is the workload's namespace ("default" when the manifests
	// name none, as kubectl applies them).
	Namespace string
	// Registrar is the registrar container in the workload's pod; empty when
	// no container runs a node-driver-registrar image or csi-registrar's
	// register command (the driver registers in-process).
	Registrar string

	// DriverName is the name the kubelet must register, from the registrar's
	// --driver-name, else from the one CSIDriver object; empty when the
	// objects do not say (then only GetInfo on the node can tell).
	DriverName string
	// DriverNameFrom says where DriverName comes from.
	DriverNameFrom string
	// CSIDrivers are the names of the CSIDriver objects in the manifests.
	CSIDrivers []string

	// CSIAddress is the registrar's --csi-address (default /run/csi/socket,
	// unix:// removed, $(VAR) expanded from the container's env values).
	CSIAddress string
	// RegistrationPath is --kubelet-registration-path, expanded.
	RegistrationPath string
	// HostSocket is where CSIAddress is on the node, from the hostPath
	// volume mounted over it; empty when that is not a hostPath.
	HostSocket string
	// HostSocketVia explains HostSocket (the mount and volume).
	HostSocketVia string
	// HTTPPort is the port of --http-endpoint (or --health-port): /readyz
	// and /metrics; empty when the registrar serves no HTTP.
	HTTPPort string
	// RollingUpdate says where the manifests turn on csi-registrar's
	// rolling-update mode (--rolling-update in the registrar container's
	// args, with $(VAR) expanded from its env, or CSI_REGISTRAR_ROLLING_UPDATE
	// in its env; without a registrar container, in any container of the
	// pod: the driver registers in-process); empty when they do not.
	RollingUpdate string
}

// Parse reads rendered manifests (YAML documents separated by ---), swaps
// the image of every container whose image repository ends in
// node-driver-registrar, and of every csi-registrar registrar sidecar, for
// registrarImage, and learns the Spec.
func Parse(rendered []byte, registrarImage string) (*Spec, error) {
	if registrarImage == "" {
		return nil, errors.New("the registrar image under test is empty: pass it (kubectl csi-registrar verify --registrar-image, e.g. csi-registrar:dev)")
	}
	objs, err := splitObjects(rendered)
	if err != nil {
		return nil, err
	}
	s := &Spec{Objects: objs}
	var nodeSets []Workload
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		meta, _ := o["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		if kind == "CSIDriver" {
			s.CSIDrivers = append(s.CSIDrivers, name)
		}
		podSpec := podSpecOf(o)
		if podSpec == nil {
			continue
		}
		for _, field := range []string{"initContainers", "containers"} {
			cs, _ := podSpec[field].([]any)
			for _, c := range cs {
				ct, _ := c.(map[string]any)
				img, _ := ct["image"].(string)
				if !IsUpstreamRegistrar(img) && !isCSIRegistrarSidecar(ct) {
					continue
				}
				cname, _ := ct["name"].(string)
				sw := Swap{Kind: kind, Namespace: ns, Name: name, Container: cname, From: img, To: registrarImage}
				ct["image"] = registrarImage
				if pp, _ := ct["imagePullPolicy"].(string); pp == string(corev1.PullAlways) {
					ct["imagePullPolicy"] = string(corev1.PullIfNotPresent)
					sw.PullPolicy = pp
				}
				s.Swaps = append(s.Swaps, sw)
			}
		}
		w, ok, err := workloadOf(o)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, name, err)
		}
		if _, plugin := nodeplugin.RecognizeSpec(&w.Template.Spec); ok && plugin && !forWindows(&w.Template.Spec) {
			nodeSets = append(nodeSets, w)
		}
	}
	switch len(nodeSets) {
	case 0:
		what := "and no container image's repository ends in \"" + UpstreamRegistrarSuffix + "\" (nor runs csi-registrar register)"
		if len(s.Swaps) > 0 {
			what = "so the registrar containers found (" + swapList(s.Swaps) + ") cannot register"
		}
		return nil, fmt.Errorf("no DaemonSet, StatefulSet or Deployment for Linux nodes mounts the kubelet's %s from the node (a hostPath volume), %s: the suite checks a node plugin, which registers through that directory; mount it into the registrar (or the driver, when it registers in-process)", PluginsRegistryDir, what)
	case 1:
	default:
		var names []string
		for _, w := range nodeSets {
			names = append(names, w.String())
		}
		return nil, fmt.Errorf("%d workloads mount the kubelet's %s (%s): the suite checks one driver at a time; pass the manifests of one", len(nodeSets), PluginsRegistryDir, strings.Join(names, ", "))
	}
	s.Workload = nodeSets[0]
	s.Namespace = s.Workload.Namespace
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if err := s.learn(); err != nil {
		return nil, err
	}
	return s, nil
}

// takesValue reports whether k is one of the registrar flags the suite
// reads, each of which takes a value.
func takesValue(k string) bool {
	switch k {
	case "csi-address", "kubelet-registration-path", "driver-name", "http-endpoint", "health-port":
		return true
	}
	return false
}

// learn reads the registrar's container: its flags and its socket.
func (s *Spec) learn() error {
	w := s.Workload
	pod := &w.Template.Spec
	var reg *corev1.Container
	for _, sw := range s.Swaps {
		if sw.Kind == w.Kind && sw.Name == w.Name && sw.Namespace == w.Namespace {
			if reg != nil {
				return fmt.Errorf("%s runs two registrars (%s and %s): one driver per pod", w, reg.Name, sw.Container)
			}
			reg = container(pod, sw.Container)
		}
	}
	if reg == nil {
		// In-process: the driver creates its registration socket itself;
		// its name and endpoint come from GetInfo on the node.
		for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
			for i := range cs {
				if s.RollingUpdate == "" {
					s.RollingUpdate = RollingUpdateIn(&cs[i])
				}
			}
		}
		return nil
	}
	s.Registrar = reg.Name
	s.RollingUpdate = RollingUpdateIn(reg)
	env := envValues(reg)
	flags := map[string]string{}
	args := append(slices.Clone(reg.Command), reg.Args...)
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		k, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && takesValue(k) && i+1 < len(args) {
			v = args[i+1] // --flag value
		}
		flags[k] = Expand(v, env)
	}
	s.CSIAddress = strings.TrimPrefix(flags["csi-address"], "unix://")
	if s.CSIAddress == "" {
		s.CSIAddress = "/run/csi/socket" // the registrar's default, as upstream's
	}
	s.RegistrationPath = flags["kubelet-registration-path"]
	if s.RegistrationPath == "" {
		return fmt.Errorf("%s, container %s: no --kubelet-registration-path=<the driver's socket on the node>: the registrar needs it", w, reg.Name)
	}
	if ep := flags["http-endpoint"]; ep != "" {
		if i := strings.LastIndexByte(ep, ':'); i >= 0 {
			s.HTTPPort = ep[i+1:]
		}
	} else if hp := flags["health-port"]; hp != "" && hp != "0" {
		s.HTTPPort = hp
	}

	// The driver name: the registrar's flag, else the one CSIDriver object.
	switch {
	case flags["driver-name"] != "":
		s.DriverName, s.DriverNameFrom = flags["driver-name"], "--driver-name of container "+reg.Name
	case len(s.CSIDrivers) == 1:
		s.DriverName, s.DriverNameFrom = s.CSIDrivers[0], "the CSIDriver object"
	}

	// The socket on the node: the hostPath volume mounted over --csi-address.
	var mount *corev1.VolumeMount
	for i := range reg.VolumeMounts {
		m := &reg.VolumeMounts[i]
		if within(s.CSIAddress, m.MountPath) && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount = m
		}
	}
	if mount != nil {
		rel := strings.TrimPrefix(strings.TrimPrefix(s.CSIAddress, path.Clean(mount.MountPath)), "/")
		if mount.SubPath != "" {
			rel = path.Join(mount.SubPath, rel)
		}
		for _, v := range pod.Volumes {
			if v.Name == mount.Name && v.HostPath != nil {
				s.HostSocket = path.Join(v.HostPath.Path, rel)
				s.HostSocketVia = fmt.Sprintf("container %s mounts volume %s (hostPath %s) at %s", reg.Name, v.Name, v.HostPath.Path, mount.MountPath)
			}
		}
	}
	return nil
}

// Problems lists what is wrong in the manifests themselves, before anything
// runs: a registration path that is not where the registrar's
// --csi-address is on the node. Each names the values and the fix.
func (s *Spec) Problems() []string {
	var p []string
	if s.Registrar == "" {
		return nil // in-process: the node tells (GetInfo)
	}
	reg := s.Workload.String() + ", container " + s.Registrar
	switch {
	case strings.Contains(s.RegistrationPath, "$("):
		// From a field or a secret: only the node can tell (GetInfo).
	case s.RegistrationPath != path.Clean(s.RegistrationPath) || !path.IsAbs(s.RegistrationPath):
		p = append(p, fmt.Sprintf("%s: --kubelet-registration-path=%s is not an absolute, clean path: the kubelet dials it on the node", reg, s.RegistrationPath))
	case s.HostSocket == "":
		p = append(p, fmt.Sprintf("%s: --csi-address=%s is not on a hostPath volume: the kubelet cannot reach the driver's socket", reg, s.CSIAddress))
	case s.HostSocket != s.RegistrationPath:
		p = append(p, fmt.Sprintf("%s: --kubelet-registration-path=%s is not the driver's socket on the node: --csi-address=%s is %s there (%s). The kubelet calls NodeGetInfo at the registration path; fix: --kubelet-registration-path=%s",
			reg, s.RegistrationPath, s.CSIAddress, s.HostSocket, s.HostSocketVia, s.HostSocket))
	}
	return p
}

// Label sets the label key=value on every object (metadata.labels), so
// that what is applied can be found again by that label (verify's cleanup).
// Pod templates are left as written: pods are their workload's.
func (s *Spec) Label(key, value string) {
	for _, o := range s.Objects {
		md, _ := o["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			o["metadata"] = md
		}
		labels, _ := md["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
			md["labels"] = labels
		}
		labels[key] = value
	}
}

// YAML returns the objects as YAML documents, for kubectl apply -f.
func (s *Spec) YAML() ([]byte, error) {
	var b bytes.Buffer
	for i, o := range s.Objects {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// RollingUpdateEnv is the environment variable csi-registrar reads for
// --rolling-update.
const RollingUpdateEnv = "CSI_REGISTRAR_ROLLING_UPDATE"

// RollingUpdateIn says where container c turns on the rolling-update mode:
// an arg --rolling-update=V (or --rolling-update V) with V not empty, $(VAR)
// expanded from the container's env values, or RollingUpdateEnv set in its
// env; empty when it does not.
func RollingUpdateIn(c *corev1.Container) string {
	env := envValues(c)
	args := append(slices.Clone(c.Command), c.Args...)
	for i, a := range args {
		a = Expand(a, env)
		if !strings.HasPrefix(a, "-") {
			continue
		}
		k, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if k != "rolling-update" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			v = Expand(args[i+1], env)
		}
		if v != "" {
			return fmt.Sprintf("container %s: %s", c.Name, args[i])
		}
	}
	for _, e := range c.Env {
		if e.Name == RollingUpdateEnv && (e.Value != "" || e.ValueFrom != nil) {
			return fmt.Sprintf("container %s: env %s", c.Name, RollingUpdateEnv)
		}
	}
	return ""
}

// isCSIRegistrarSidecar reports whether the container runs csi-registrar as
// a registrar sidecar: an image whose repository's last element is
// csi-registrar, running its register command (the image's entrypoint when
// the container names no command). Its image is swapped as upstream's is. A
// container running `csi-registrar driver` (the reference driver, which may
// register in-process) is not one.
func isCSIRegistrarSidecar(ct map[string]any) bool {
	img, _ := ct["image"].(string)
	if path.Base(Repository(img)) != "csi-registrar" {
		return false
	}
	var words []string
	for _, field := range []string{"command", "args"} {
		l, _ := ct[field].([]any)
		for _, w := range l {
			s, _ := w.(string)
			words = append(words, s)
		}
	}
	cmd, _ := ct["command"].([]any)
	if len(cmd) == 0 {
		return true // the entrypoint: csi-registrar register, then the args
	}
	return len(words) > 1 && path.Base(words[0]) == "csi-registrar" && words[1] == "register"
}

// IsUpstreamRegistrar reports whether image is a node-driver-registrar
// image: its repository (without registry port, tag or digest) ends in
// node-driver-registrar.
func IsUpstreamRegistrar(image string) bool {
	return strings.HasSuffix(Repository(image), UpstreamRegistrarSuffix)
}

// Repository returns image without its tag and digest.
func Repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// Expand replaces $(VAR) by env[VAR] as Kubernetes expands args; $$ is a
// literal $, and a reference to a variable not in env is left as written.
func Expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if j := strings.IndexByte(s[i:], ')'); j > 0 {
				if v, ok := env[s[i+2:i+j]]; ok {
					b.WriteString(v)
					i += j
					continue
				}
			}
		}
		b.WriteByte('$')
	}
	return b.String()
}

// ExpandForPod expands $(VAR) in s as the kubelet does for a container of
// pod: from its env entries with a literal value and those set from a field
// of the pod (metadata.name, metadata.namespace, metadata.uid, spec.nodeName,
// spec.serviceAccountName, status.podIP, status.hostIP). A path the
// manifests build from the pod's UID (the rolling-update mode's
// /csi/$(POD_UID).sock) is one path per pod. container "" takes the first
// definition of each name over all the pod's containers (in-process
// registration: the container is not known yet).
func ExpandForPod(s string, pod *corev1.Pod, container string) string {
	env := map[string]string{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			if container != "" && c.Name != container {
				continue
			}
			for k, v := range containerEnv(c, pod) {
				if _, seen := env[k]; !seen {
					env[k] = v
				}
			}
		}
	}
	return Expand(s, env)
}

// podField returns the value of a downward API field of pod.
func podField(pod *corev1.Pod, fieldPath string) (string, bool) {
	switch fieldPath {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.podIP":
		return pod.Status.PodIP, true
	case "status.hostIP":
		return pod.Status.HostIP, true
	}
	return "", false
}

// envValues returns the container's env entries that have a literal value.
func envValues(c *corev1.Container) map[string]string { return containerEnv(c, nil) }

// containerEnv returns the container's env entries as the kubelet expands
// them: literal values and, when pod is given, those set from a field of
// pod; an entry may use the ones before it.
func containerEnv(c *corev1.Container, pod *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		v, ok := e.Value, e.ValueFrom == nil
		if pod != nil && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v, ok = podField(pod, e.ValueFrom.FieldRef.FieldPath)
		}
		if ok {
			env[e.Name] = Expand(v, env)
		}
	}
	return env
}

func container(pod *corev1.PodSpec, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func forWindows(pod *corev1.PodSpec) bool {
	return pod.NodeSelector["kubernetes.io/os"] == "windows"
}

func swapList(sw []Swap) string {
	var out []string
	for _, s := range sw {
		out = append(out, s.String())
	}
	return strings.Join(out, "; ")
}

// podSpecOf returns the pod spec inside a workload object (nil for other
// kinds), as the live map: changing it changes the object.
func podSpecOf(o map[string]any) map[string]any {
	get := func(m map[string]any, keys ...string) map[string]any {
		for _, k := range keys {
			next, _ := m[k].(map[string]any)
			if next == nil {
				return nil
			}
			m = next
		}
		return m
	}
	switch o["kind"] {
	case "Pod":
		return get(o, "spec")
	case "DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job", "ReplicationController":
		return get(o, "spec", "template", "spec")
	case "CronJob":
		return get(o, "spec", "jobTemplate", "spec", "template", "spec")
	}
	return nil
}

// splitObjects decodes YAML documents into objects; empty documents and
// List objects (kubectl get -o yaml) are handled.
func splitObjects(rendered []byte) ([]map[string]any, error) {
	var objs []map[string]any
	for i, doc := range splitDocuments(rendered) {
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(o) == 0 {
			continue
		}
		if k, _ := o["kind"].(string); strings.HasSuffix(k, "List") {
			items, _ := o["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					objs = append(objs, m)
				}
			}
			continue
		}
		if _, ok := o["kind"].(string); !ok {
			return nil, fmt.Errorf("document %d has no kind: not a Kubernetes object", i+1)
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		return nil, errors.New("the manifests render no object")
	}
	return objs, nil
}

// splitDocuments splits a YAML stream at its `---` lines.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

func convert(from map[string]any, to any) error {
	js, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(js, to)
}

// PluginsRegistryDir names the kubelet's plugin registration directory in
// messages.
const PluginsRegistryDir = "<kubelet root>/" + csiplugin.PluginsRegistryDir

// Workload is a node plugin's controller object: what the suite needs of it.
type Workload struct {
	Kind, Name, Namespace string
	Selector              *metav1.LabelSelector
	Template              corev1.PodTemplateSpec
	// Replicas of a StatefulSet or Deployment (0 for a DaemonSet).
	Replicas int32
	// Pinned: its pod can only run on one node (spec.nodeName, or a
	// nodeSelector on kubernetes.io/hostname); a DaemonSet's pods never move.
	Pinned bool
	// Strategy is the update strategy's type as written, defaulted as the
	// API server does (RollingUpdate); MaxSurge and MaxUnavailable its
	// rolling update's values as written, defaulted likewise (a DaemonSet:
	// 0 and 1; a Deployment: 25% and 25%; a StatefulSet: none and 1).
	Strategy                 string
	MaxSurge, MaxUnavailable string
}

// OnDelete reports whether a change of the pod template replaces no pod
// (updateStrategy OnDelete).
func (w Workload) OnDelete() bool { return w.Strategy == "OnDelete" }

// Rollout says what a rollout (a change of the pod template) does to the
// workload's pod on a node.
func (w Workload) Rollout() string {
	switch {
	case w.OnDelete():
		return "updateStrategy OnDelete: a template change replaces no pod until it is deleted"
	case w.Kind == "DaemonSet" && w.MaxSurge != "0" && w.MaxSurge != "0%":
		return fmt.Sprintf("a DaemonSet with maxSurge %s: the new pod starts beside the old one on its node, the old one is deleted once the new one is Ready", w.MaxSurge)
	case w.Kind == "DaemonSet":
		return fmt.Sprintf("a DaemonSet with maxSurge %s (maxUnavailable %s): the old pod is deleted before the new one starts on its node", w.MaxSurge, w.MaxUnavailable)
	case w.Kind == "StatefulSet":
		return "a StatefulSet replaces its pod in place (the old one is deleted, then the new one is created): the driver is unregistered meanwhile, as expected"
	case w.Strategy == "Recreate":
		return "a Deployment with strategy Recreate: the old pod is deleted before the new one is created (which may land on another node)"
	case w.Pinned:
		return fmt.Sprintf("a Deployment with maxSurge %s, pinned to one node: the new pod starts on the same node", w.MaxSurge)
	}
	return fmt.Sprintf("a Deployment with maxSurge %s: the new pod may land on another node than the old one", w.MaxSurge)
}

func (w Workload) String() string {
	if w.Namespace == "" {
		return w.Kind + " " + w.Name
	}
	return w.Kind + " " + w.Namespace + "/" + w.Name
}

// Moves reports whether a new pod of the workload may run on another node
// than the one it replaces.
func (w Workload) Moves() bool { return w.Kind != "DaemonSet" && !w.Pinned }

// workloadOf reads a DaemonSet, StatefulSet or Deployment; ok is false for
// other kinds.
func workloadOf(o map[string]any) (Workload, bool, error) {
	var w Workload
	switch o["kind"] {
	case "DaemonSet":
		var ds appsv1.DaemonSet
		if err := convert(o, &ds); err != nil {
			return w, false, err
		}
		w = Workload{Kind: "DaemonSet", Name: ds.Name, Namespace: ds.Namespace, Selector: ds.Spec.Selector, Template: ds.Spec.Template,
			Strategy: string(ds.Spec.UpdateStrategy.Type), MaxSurge: "0", MaxUnavailable: "1"}
		if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			w.MaxSurge, w.MaxUnavailable = orDefault(ru.MaxSurge, "0"), orDefault(ru.MaxUnavailable, "1")
		}
	case "StatefulSet":
		var ss appsv1.StatefulSet
		if err := convert(o, &ss); err != nil {
			return w, false, err
		}
		w = Workload{Kind: "StatefulSet", Name: ss.Name, Namespace: ss.Namespace, Selector: ss.Spec.Selector, Template: ss.Spec.Template, Replicas: replicas(ss.Spec.Replicas),
			Strategy: string(ss.Spec.UpdateStrategy.Type), MaxSurge: "none", MaxUnavailable: "1"}
		if ru := ss.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			w.MaxUnavailable = orDefault(ru.MaxUnavailable, "1")
		}
	case "Deployment":
		var d appsv1.Deployment
		if err := convert(o, &d); err != nil {
			return w, false, err
		}
		w = Workload{Kind: "Deployment", Name: d.Name, Namespace: d.Namespace, Selector: d.Spec.Selector, Template: d.Spec.Template, Replicas: replicas(d.Spec.Replicas),
			Strategy: string(d.Spec.Strategy.Type), MaxSurge: "25%", MaxUnavailable: "25%"}
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			w.MaxSurge, w.MaxUnavailable = orDefault(ru.MaxSurge, "25%"), orDefault(ru.MaxUnavailable, "25%")
		}
	default:
		return w, false, nil
	}
	if w.Selector == nil {
		return w, false, fmt.Errorf("no spec.selector")
	}
	if w.Strategy == "" {
		w.Strategy = "RollingUpdate"
	}
	ps := w.Template.Spec
	w.Pinned = ps.NodeName != "" || ps.NodeSelector["kubernetes.io/hostname"] != ""
	return w, true, nil
}

func orDefault(v *intstr.IntOrString, def string) string {
	if v == nil {
		return def
	}
	return v.String()
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}
