package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The rolling-update mode in the manifests (docs/operating.md, "Rolling
// updates and maxSurge"): every variant that turns it on must render the same
// few changes, consistently, and every socket path must fit a unix socket
// address where the kubelet dials it.

// podUIDPlaceholder is how the manifests name the pod's UID: the kubelet
// expands it in args and env values from env POD_UID (downward API).
const podUIDPlaceholder = "$(POD_UID)"

// examplePodUID has the length of every pod UID the API server assigns (a
// UUID, 36 characters): what the placeholder becomes on a node.
const examplePodUID = "0d8c4c6e-5b8f-4a53-9a0e-1f2a3b4c5d6e"

// longDriverName is as long as a driver name can be (63 characters, the
// limit of a CSIDriver object's name).
const longDriverName = "driver-name-of-the-longest-length-kubernetes-allows.example.com"

// rollingVariant is one rendering with the mode on.
type rollingVariant struct {
	objs      []object
	driver    string // the container serving CSI
	registrar string // the container with --rolling-update (the driver's, in-process)
}

func rollingVariants(t *testing.T) map[string]rollingVariant {
	t.Helper()
	return map[string]rollingVariant{
		"manifests/":                    {kustomize(t, "."), "driver", "registrar"},
		"manifests/overlays/in-process": {kustomize(t, filepath.Join("overlays", "in-process")), "driver", "driver"},
		"manifests/overlays/k0s":        {kustomize(t, filepath.Join("overlays", "k0s")), "driver", "registrar"},
		"helm template":                 {helmTemplate(t, nil), "driver", "registrar"},
		"helm template --set kubeletDir=" + kubeletRoots["k0s"]: {
			helmTemplate(t, map[string]any{"kubeletDir": kubeletRoots["k0s"]}), "driver", "registrar"},
		"helm template --set driverName=<63 characters>": {
			helmTemplate(t, map[string]any{"driverName": longDriverName}), "driver", "registrar"},
		"manifests/examples/upstream-style-rolling-update": {
			kustomize(t, filepath.Join("examples", "upstream-style-rolling-update")), "stub", "node-driver-registrar"},
	}
}

// TestRollingUpdateVariants: each variant with the mode rolls with maxSurge
// 1 / maxUnavailable 0, passes --rolling-update=$(POD_UID) to the registrar
// (the driver, in-process), names the same per-pod socket in the driver's
// endpoint, the registrar's --csi-address, the --kubelet-registration-path
// and the exec probes' environment, and every socket path fits.
func TestRollingUpdateVariants(t *testing.T) {
	for name, v := range rollingVariants(t) {
		t.Run(name, func(t *testing.T) {
			ds := daemonSet(t, v.objs)
			s := checkRollingUpdate(t, ds, v.driver, v.registrar)
			checkSocketLengths(t, s)
		})
	}
}

// TestChartRollingUpdate: the chart renders the rolling update by default, as
// manifests/ does, and with rollingUpdate.enabled=false exactly what
// overlays/without-rolling-update renders.
func TestChartRollingUpdate(t *testing.T) {
	off := map[string]any{"rollingUpdate": map[string]any{"enabled": false}}
	diffObjects(t, "kubectl kustomize overlays/without-rolling-update", kustomize(t, filepath.Join("overlays", "without-rolling-update")),
		"helm template --set rollingUpdate.enabled=false", helmTemplate(t, off))
	diffObjects(t, "helm template", helmTemplate(t, nil),
		"helm template --set rollingUpdate.enabled=true", helmTemplate(t, map[string]any{"rollingUpdate": map[string]any{"enabled": true}}))
	for name, objs := range map[string][]object{
		"helm template --set rollingUpdate.enabled=false": helmTemplate(t, off),
		"helm template --set rollingUpdate.enabled=false,kubeletDir=microk8s": helmTemplate(t,
			map[string]any{"rollingUpdate": off["rollingUpdate"], "kubeletDir": kubeletRoots["microk8s"]}),
		"kubectl kustomize overlays/without-rolling-update": kustomize(t, filepath.Join("overlays", "without-rolling-update")),
	} {
		ds := daemonSet(t, objs)
		ru := ds.Spec.UpdateStrategy.RollingUpdate
		if ru == nil || ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 1 {
			t.Errorf("%s: updateStrategy %+v, want maxSurge 0 / maxUnavailable 1 without the mode", name, ds.Spec.UpdateStrategy)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "POD_UID" || strings.Contains(e.Value, podUIDPlaceholder) {
					t.Errorf("%s: container %s has env %s without the mode", name, c.Name, e.Name)
				}
			}
			for _, a := range c.Args {
				if strings.HasPrefix(a, "--rolling-update") || strings.Contains(a, podUIDPlaceholder) {
					t.Errorf("%s: container %s has %s without the mode", name, c.Name, a)
				}
			}
		}
	}
}

// TestSocketPathLengths: a unix socket path holds at most 107 bytes
// (csiplugin.MaxSocketPathLength), and with the mode the driver's socket is
// named by the pod's UID, 36 characters. For the reference driver name,
//
//	/var/lib/kubelet/plugins/stub.csi.example.com/<UID>.sock  87 bytes
//
// fits. For a driver name of 63 characters, the longest a CSIDriver allows,
//
//	/var/lib/kubelet/plugins/<63 characters>/<UID>.sock      130 bytes
//
// does not: the kubelet could not dial it and the registrar refuses it. Such
// a driver must serve its sockets from a shorter directory; the chart does so
// by itself (templates/_helpers.tpl, "csi-registrar.socketDir": the first 16
// hex digits of the name's SHA-256). The registration socket,
// <driver>-reg.sock, is the same with the handover and without it: 106
// bytes for that name at the default kubelet root.
func TestSocketPathLengths(t *testing.T) {
	hostPath := func(dir string) string {
		return path.Join(defaultKubeletDir, "plugins", dir, examplePodUID+".sock")
	}
	if p := hostPath("stub.csi.example.com"); csiplugin.ValidateHostSocketPath("endpoint", p) != nil || len(p) != 87 {
		t.Errorf("%s: %d bytes, want 87 and valid", p, len(p))
	}
	p := hostPath(longDriverName)
	if len(longDriverName) != 63 || len(p) != 130 {
		t.Fatalf("%s: %d bytes (name %d), want 130 (63)", p, len(p), len(longDriverName))
	}
	if err := csiplugin.ValidateHostSocketPath("kubelet registration path", p); err == nil {
		t.Errorf("%s (%d bytes) passes the registrar's check", p, len(p))
	}
	reg := path.Join(defaultKubeletDir, "plugins_registry", longDriverName+csiplugin.RegistrationSocketSuffix)
	if len(reg) != 106 {
		t.Errorf("%s: %d bytes, want 106", reg, len(reg))
	}

	// The chart, with that name: a short directory, in every path.
	ds := daemonSet(t, helmTemplate(t, map[string]any{"driverName": longDriverName}))
	s := checkRollingUpdate(t, ds, "driver", "registrar")
	sum := sha256.Sum256([]byte(longDriverName))
	want := path.Join(defaultKubeletDir, "plugins", hex.EncodeToString(sum[:])[:16], podUIDPlaceholder+".sock")
	if s.host != want {
		t.Errorf("the chart's socket for a 63-character name is %s, want %s (the name's SHA-256, 16 hex digits)", s.host, want)
	}
	checkSocketLengths(t, s)
	// Without the mode the name fits (csi.sock is short) and is kept.
	ds = daemonSet(t, helmTemplate(t, map[string]any{"rollingUpdate": map[string]any{"enabled": false}, "driverName": longDriverName}))
	if got := volumeHostPath(t, ds, "socket-dir"); got != path.Join(defaultKubeletDir, "plugins", longDriverName)+"/" {
		t.Errorf("without the mode the socket directory of a 63-character name is %s, want the name", got)
	}
}

// TestChartSocketPaths: for any kubelet root and driver name the chart
// either renders sockets that all fit, or refuses with the reason; it never
// renders a path the kubelet cannot dial.
func TestChartSocketPaths(t *testing.T) {
	roots := []string{defaultKubeletDir, kubeletRoots["k0s"], kubeletRoots["microk8s"], "/var/lib/a-kubelet-root-of-forty-five-bytes-xx",
		"/var/lib/a-kubelet-root-of-fifty-three-bytes-xxxxxxxx"}
	names := []string{"stub.csi.example.com", "a.io", strings.Repeat("x", 41), strings.Repeat("x", 42), longDriverName}
	seen := map[string]int{} // outcomes: every one must occur
	for _, root := range roots {
		for _, name := range names {
			for _, rolling := range []bool{false, true} {
				set := map[string]any{"kubeletDir": root, "driverName": name, "rollingUpdate": map[string]any{"enabled": rolling}}
				objs, err := renderChart(set)
				// What must not fit for the chart to refuse: the registration
				// socket the kubelet dials (with the handover or without), or
				// a directory of 8 characters when the name does not fit.
				file := "csi.sock"
				if rolling {
					file = examplePodUID + ".sock"
				}
				room := csiplugin.MaxSocketPathLength - len(path.Join(root, "plugins", "", file)) - 1
				reg := path.Join(root, "plugins_registry", name+csiplugin.RegistrationSocketSuffix)
				noRoom := len(name) > room && room < 8
				mustFail := noRoom || len(reg) > csiplugin.MaxSocketPathLength
				switch {
				case err != nil && noRoom:
					seen["refused: no room for a directory"]++
				case err != nil:
					seen["refused: registration socket too long"]++
				case len(name) > room:
					seen["rendered with a short directory"]++
				default:
					seen["rendered with the name as directory"]++
				}
				if err != nil {
					if !mustFail {
						t.Errorf("%v: %v", set, err)
					} else if !strings.Contains(err.Error(), "a unix socket path holds at most 107") {
						t.Errorf("%v: the error does not say why: %v", set, err)
					}
					continue
				}
				if mustFail {
					t.Errorf("%v: rendered, but %s is %d bytes or the directory has room for %d", set, reg, len(reg), room)
					continue
				}
				ds := daemonSet(t, parseObjects(t, "helm template", objs...))
				dir := strings.TrimSuffix(volumeHostPath(t, ds, "socket-dir"), "/")
				if keep := len(name) <= room; keep != (path.Base(dir) == name) {
					t.Errorf("%v: socket directory %s; the name fits (%v) but is not kept, or does not and is", set, dir, keep)
				}
				if rolling {
					checkSocketLengths(t, checkRollingUpdate(t, ds, "driver", "registrar"))
				} else if p := dir + "/csi.sock"; len(p) > csiplugin.MaxSocketPathLength {
					t.Errorf("%v: %s is %d bytes", set, p, len(p))
				}
			}
		}
	}
	if len(seen) != 4 {
		t.Errorf("outcomes %v: the cases no longer cover all four", seen)
	}
}

// renderChart is helmTemplate returning the render error: the YAML
// documents, or the error of a template's fail.
func renderChart(set map[string]any) ([]string, error) { return renderChartOn(set, "1.37.2") }

// renderChartOn is renderChart for an API server of version kube.
func renderChartOn(set map[string]any, kube string) ([]string, error) {
	ch, err := loader.Load("chart")
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(ch, set,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: "default", IsInstall: true}, apiServer(kube))
	if err != nil {
		return nil, err
	}
	files, err := (&engine.Engine{Strict: true}).Render(ch, vals)
	if err != nil {
		return nil, err
	}
	var docs []string
	for name, f := range files {
		if strings.HasSuffix(name, ".yaml") {
			docs = append(docs, f)
		}
	}
	return docs, nil
}

func daemonSet(t *testing.T, objs []object) *appsv1.DaemonSet {
	t.Helper()
	var rest []object
	for _, o := range objs {
		if o["kind"] == "DaemonSet" {
			rest = append(rest, o)
		}
	}
	_, _, dss := typed(t, rest)
	if len(dss) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(dss))
	}
	return dss[0]
}

// rollingSockets is what checkRollingUpdate found.
type rollingSockets struct {
	driverName string
	host       string // the driver's CSI socket on the node, with $(POD_UID)
	regDir     string // the kubelet's plugins_registry on the node
}

// checkRollingUpdate checks one DaemonSet with the mode on and returns its
// sockets' paths on the node.
func checkRollingUpdate(t *testing.T, ds *appsv1.DaemonSet, driverName, registrarName string) rollingSockets {
	t.Helper()
	var s rollingSockets
	st := ds.Spec.UpdateStrategy
	if st.Type != appsv1.RollingUpdateDaemonSetStrategyType || st.RollingUpdate == nil ||
		st.RollingUpdate.MaxSurge == nil || *st.RollingUpdate.MaxSurge != intstr.FromInt32(1) ||
		st.RollingUpdate.MaxUnavailable == nil || *st.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) {
		t.Errorf("updateStrategy %+v, want RollingUpdate with maxSurge 1, maxUnavailable 0", st)
	}
	spec := ds.Spec.Template.Spec
	driver, registrar := container(t, spec, driverName), container(t, spec, registrarName)

	// POD_UID from the downward API, defined before any value that uses it.
	for _, c := range []*corev1.Container{driver, registrar} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_UID" })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.uid" {
			t.Errorf("container %s: no env POD_UID from fieldRef metadata.uid", c.Name)
		}
		for j, e := range c.Env {
			if strings.Contains(e.Value, podUIDPlaceholder) && j < i {
				t.Errorf("container %s: env %s uses $(POD_UID) before it is defined: the kubelet leaves it unexpanded", c.Name, e.Name)
			}
		}
	}

	// The driver's endpoint, its host path, and the registrar's view of it.
	endpoint, ok := argValue(driver, "--endpoint")
	if !ok {
		t.Fatalf("container %s: no --endpoint", driver.Name)
	}
	local, err := csiplugin.ParseEndpoint(expandArg(endpoint, driver.Env))
	if err != nil {
		t.Fatalf("container %s: %v", driver.Name, err)
	}
	if path.Base(local) != podUIDPlaceholder+".sock" {
		t.Errorf("container %s: endpoint %s, want a socket named $(POD_UID).sock", driver.Name, local)
	}
	s.host = hostPathOf(t, spec, driver, local)
	if registrar != driver {
		addr, _ := argValue(registrar, "--csi-address")
		if got := hostPathOf(t, spec, registrar, expandArg(addr, registrar.Env)); got != s.host {
			t.Errorf("registrar %s dials %s (%s on the node), the driver serves %s", registrar.Name, addr, got, s.host)
		}
	}
	if v, _ := argValue(registrar, "--kubelet-registration-path"); expandArg(v, registrar.Env) != s.host {
		t.Errorf("container %s: --kubelet-registration-path=%s is %s, the driver's socket on the node is %s",
			registrar.Name, v, expandArg(v, registrar.Env), s.host)
	}
	if n := slices.Index(registrar.Args, "--rolling-update="+podUIDPlaceholder); n < 0 {
		t.Errorf("container %s: no --rolling-update=$(POD_UID) in %q", registrar.Name, registrar.Args)
	}
	regLocal, ok := argValue(registrar, "--plugin-registration-path")
	if !ok {
		regLocal = "/registration"
	}
	s.regDir = hostPathOf(t, spec, registrar, regLocal)
	if s.driverName, ok = argValue(driver, "--driver-name"); !ok {
		t.Errorf("container %s: no --driver-name", driver.Name)
	}

	// Exec probes with `csi-registrar probe`: the socket from env, since the
	// kubelet does not expand $(VAR) in probe commands.
	probes := 0
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command[:min(2, len(p.Exec.Command))], []string{"/csi-registrar", "probe"}) {
				continue
			}
			probes++
			for _, a := range p.Exec.Command {
				if strings.Contains(a, "$(") || strings.HasPrefix(a, "--csi-address") {
					t.Errorf("container %s: probe argument %s: the socket must come from env CSI_REGISTRAR_PROBE_CSI_ADDRESS", c.Name, a)
				}
			}
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CSI_REGISTRAR_PROBE_CSI_ADDRESS" })
			if i < 0 {
				t.Errorf("container %s: an exec probe without env CSI_REGISTRAR_PROBE_CSI_ADDRESS", c.Name)
				continue
			}
			if got := hostPathOf(t, spec, c, expandEnvOrdered(c.Env[i].Value, c.Env[:i])); got != s.host {
				t.Errorf("container %s: CSI_REGISTRAR_PROBE_CSI_ADDRESS=%s is %s on the node, the driver serves %s", c.Name, c.Env[i].Value, got, s.host)
			}
		}
	}
	if probes == 0 {
		t.Errorf("no exec probe with csi-registrar probe: nothing checks this pod's own socket")
	}

	// Readiness: the old pod goes once the new one is Ready.
	ready := registrar.ReadinessProbe
	if ready == nil {
		t.Errorf("container %s: no readiness probe: the new pod is Ready before it serves", registrar.Name)
	}
	if spec.HostNetwork {
		// The old and the new pod share the host's ports.
		for _, c := range spec.Containers {
			if len(c.Ports) > 0 {
				t.Errorf("hostNetwork: container %s declares ports %v: the new pod cannot run beside the old one", c.Name, c.Ports)
			}
			for _, a := range c.Args {
				if strings.HasPrefix(a, "--http-endpoint") || strings.HasPrefix(a, "--health-port") {
					t.Errorf("hostNetwork: container %s binds a TCP port (%s)", c.Name, a)
				}
			}
		}
	} else if ready != nil && (ready.HTTPGet == nil || ready.HTTPGet.Path != "/readyz") {
		t.Errorf("container %s: readiness %+v, want /readyz (registered and the driver answers)", registrar.Name, ready)
	}
	return s
}

// checkSocketLengths checks, for a pod UID of 36 characters, that the
// driver's socket, the handover's files beside it and the registration
// socket fit where the kubelet and the registrars dial them.
func checkSocketLengths(t *testing.T, s rollingSockets) {
	t.Helper()
	host := strings.ReplaceAll(s.host, podUIDPlaceholder, examplePodUID)
	if err := csiplugin.ValidateHostSocketPath("the driver's socket on the node", host); err != nil {
		t.Error(err)
	}
	for _, f := range []string{"csi-endpoint.sock", ".csi-registrar-handover.sock"} {
		if err := csiplugin.ValidateHostSocketPath("the handover's "+f, path.Join(path.Dir(host), f)); err != nil {
			t.Error(err)
		}
	}
	reg := path.Join(s.regDir, s.driverName+csiplugin.RegistrationSocketSuffix)
	if err := csiplugin.CheckSocketPathLength("registration socket", reg, ""); err != nil {
		t.Error(err)
	}
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// argValue returns the value of the last --flag=value in c's args.
func argValue(c *corev1.Container, flag string) (string, bool) {
	v, found := "", false
	for _, a := range c.Args {
		if rest, ok := strings.CutPrefix(a, flag+"="); ok {
			v, found = rest, true
		}
	}
	return v, found
}

// expandArg expands $(NAME) in an argument from env as the kubelet does,
// each value itself expanded from the variables above it; $(POD_UID) (from
// the downward API) stays.
func expandArg(s string, env []corev1.EnvVar) string {
	vals := map[string]string{}
	for _, e := range env {
		if e.ValueFrom == nil {
			vals[e.Name] = expandWith(e.Value, vals)
		}
	}
	return expandWith(s, vals)
}

// expandEnvOrdered expands an env value from the variables defined above it.
func expandEnvOrdered(s string, above []corev1.EnvVar) string { return expandArg(s, above) }

func expandWith(s string, vals map[string]string) string {
	for k, v := range vals {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

// hostPathOf returns the node's path of p as container c sees it, through
// the hostPath volume mounted at p's directory.
func hostPathOf(t *testing.T, spec corev1.PodSpec, c *corev1.Container, p string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.MountPath, "/"))
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return path.Clean(v.HostPath.Path + rel)
			}
		}
	}
	t.Errorf("container %s: %s is on no hostPath volume", c.Name, p)
	return ""
}

func volumeHostPath(t *testing.T, ds *appsv1.DaemonSet, name string) string {
	t.Helper()
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	t.Fatalf("no hostPath volume %s", name)
	return ""
}
