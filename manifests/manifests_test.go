// Package manifests holds no Go code: its tests render the kustomizations of
// this directory with kustomize's library (what `kubectl kustomize` runs) and
// the Helm chart chart/ with Helm's library (what `helm template` runs), and
// check that both render the same objects, that kubeletDir rewrites every
// kubelet path, and the conventions every object must follow. Neither kubectl
// nor helm needs to be installed.
package manifests

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/csi-registrar/csi-registrar/internal/clusterstatus"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// releaseName is the Helm release name whose objects equal the
// kustomization's: its app.kubernetes.io/instance label.
const releaseName = "csi-stub"

// defaultKubeletDir is the kubelet's default --root-dir.
const defaultKubeletDir = "/var/lib/kubelet"

// object is one rendered Kubernetes object, parsed.
type object map[string]any

func (o object) key() string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v/%v/%v", o["kind"], md["namespace"], md["name"])
}

// parseObjects splits a multi-document YAML stream into objects, dropping
// empty documents, sorted by kind/namespace/name.
func parseObjects(t *testing.T, what string, docs ...string) []object {
	t.Helper()
	var objs []object
	for _, stream := range docs {
		for _, doc := range strings.Split("\n"+stream, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v in\n%s", what, err, doc)
			}
			if o == nil {
				continue // only comments
			}
			objs = append(objs, o)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].key() < objs[j].key() })
	return objs
}

// kustomize renders a kustomization directory as `kubectl kustomize dir` does.
func kustomize(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	return parseObjects(t, "kustomize "+dir, string(out))
}

// helmTemplate renders chart/ as `helm template csi-stub manifests/chart
// --kube-version 1.37.2 --set key=value...` does (strict: an undefined value
// is an error), or `helm install` on a cluster whose API server is 1.37.
func helmTemplate(t *testing.T, set map[string]any) []object {
	t.Helper()
	ch, err := loader.Load("chart")
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, set,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: "default", IsInstall: true},
		apiServer("1.37.2"))
	if err != nil {
		t.Fatalf("chart values %v: %v", set, err)
	}
	e := engine.Engine{Strict: true}
	files, err := e.Render(ch, vals)
	if err != nil {
		t.Fatalf("render chart with %v: %v", set, err)
	}
	var names []string
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var docs []string
	for _, n := range names {
		docs = append(docs, files[n])
	}
	return parseObjects(t, "helm template", docs...)
}

func diffObjects(t *testing.T, wantName string, want []object, gotName string, got []object) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s and %s render different objects (-%s +%s):\n%s", wantName, gotName, wantName, gotName, d)
	}
}

// typed returns the objects as their Kubernetes types, refusing unknown
// fields (a typo in a template or a patch).
func typed(t *testing.T, objs []object) (ns []*corev1.Namespace, drivers []*storagev1.CSIDriver, dss []*appsv1.DaemonSet) {
	t.Helper()
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var into any
		switch o["kind"] {
		case "Namespace":
			n := &corev1.Namespace{}
			ns, into = append(ns, n), n
		case "CSIDriver":
			d := &storagev1.CSIDriver{}
			drivers, into = append(drivers, d), d
		case "DaemonSet":
			d := &appsv1.DaemonSet{}
			dss, into = append(dss, d), d
		case "ClusterRole": // checked by TestStatusClusterRoles
			into = &rbacv1.ClusterRole{}
		default:
			t.Fatalf("unexpected object %s", o.key())
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", o.key(), err)
		}
	}
	return ns, drivers, dss
}

func TestChartRendersTheKustomization(t *testing.T) {
	want := kustomize(t, ".")
	if len(want) != 5 {
		t.Fatalf("manifests/ renders %d objects, want 5 (Namespace, CSIDriver, DaemonSet, the status ClusterRoles)", len(want))
	}
	diffObjects(t, "kubectl kustomize manifests/", want, "helm template "+releaseName+" manifests/chart", helmTemplate(t, nil))
}

// rollingUpdate.minReadySeconds sets the DaemonSet's minReadySeconds (the
// old pod's fallback window in the mode) and nothing else; 0 renders none.
func TestChartMinReadySeconds(t *testing.T) {
	_, _, dss := typed(t, helmTemplate(t, nil))
	if got := dss[0].Spec.MinReadySeconds; got != 0 {
		t.Errorf("default minReadySeconds = %d, want 0", got)
	}
	set := map[string]any{"rollingUpdate": map[string]any{"minReadySeconds": 30}}
	_, _, dss = typed(t, helmTemplate(t, set))
	if got := dss[0].Spec.MinReadySeconds; got != 30 {
		t.Errorf("--set rollingUpdate.minReadySeconds=30: minReadySeconds = %d, want 30", got)
	}
}

// kubeletRoots are the non-default kubelet roots with an overlay.
var kubeletRoots = map[string]string{
	"k0s":      "/var/lib/k0s/kubelet",
	"microk8s": "/var/snap/microk8s/common/var/lib/kubelet",
}

// withoutMode lists the overlays of kubeletRoots that turn the
// rolling-update mode off: at microk8s's root the mode's announcement
// sockets for the reference driver's name would be 111 bytes
// (TestChartSocketPaths), more than a unix socket address holds.
var withoutMode = map[string]bool{"microk8s": true}

func TestKubeletDir(t *testing.T) {
	for overlay, root := range kubeletRoots {
		t.Run(overlay, func(t *testing.T) {
			set := map[string]any{"kubeletDir": root}
			socket := "$(POD_UID).sock"
			if withoutMode[overlay] {
				set["rollingUpdate"] = map[string]any{"enabled": false}
				socket = "csi.sock"
			}
			fromChart := helmTemplate(t, set)
			fromOverlay := kustomize(t, filepath.Join("overlays", overlay))
			diffObjects(t, "kubectl kustomize overlays/"+overlay, fromOverlay, fmt.Sprintf("helm template --set %v", set), fromChart)
			_, _, dss := typed(t, fromOverlay)
			checkKubeletPaths(t, dss[0], root, socket)
			// A trailing slash in the value changes nothing.
			set["kubeletDir"] = root + "/"
			diffObjects(t, "kubeletDir="+root, fromChart, "kubeletDir="+root+"/", helmTemplate(t, set))
		})
	}
	t.Run("default", func(t *testing.T) {
		_, _, dss := typed(t, kustomize(t, "."))
		checkKubeletPaths(t, dss[0], defaultKubeletDir, "$(POD_UID).sock")
		_, _, dss = typed(t, kustomize(t, filepath.Join("overlays", "without-rolling-update")))
		checkKubeletPaths(t, dss[0], defaultKubeletDir, "csi.sock")
	})
}

// checkKubeletPaths checks that every path of ds that is the kubelet's is
// under root: the hostPaths except the driver's own state directory, the
// driver's pods mount, and the registrar's --kubelet-registration-path as the
// kubelet expands it, naming the driver's socket file socket.
func checkKubeletPaths(t *testing.T, ds *appsv1.DaemonSet, root, socket string) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	under := func(what, p, want string) {
		t.Helper()
		if p != want {
			t.Errorf("%s = %q, want %q (kubelet root %s)", what, p, want, root)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s is not a hostPath", v.Name)
			continue
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	wantHost := map[string]string{
		"socket-dir":       root + "/plugins/stub.csi.example.com/",
		"registration-dir": root + "/plugins_registry/",
		"pods-dir":         root + "/pods",
		"state-dir":        "/var/lib/csi-registrar/stub.csi.example.com", // the driver's, not the kubelet's
	}
	if d := cmp.Diff(wantHost, hostPaths); d != "" {
		t.Errorf("hostPaths for kubelet root %s (-want +got):\n%s", root, d)
	}
	var sawPodsMount, sawRegPath bool
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == "pods-dir" {
				sawPodsMount = true
				under(c.Name+" mount pods-dir", m.MountPath, root+"/pods")
			}
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--kubelet-registration-path="); ok {
				sawRegPath = true
				under(c.Name+" --kubelet-registration-path", expandEnv(v, c.Env), root+"/plugins/stub.csi.example.com/"+socket)
			}
		}
	}
	if !sawPodsMount || !sawRegPath {
		t.Errorf("no pods-dir mount (%v) or no --kubelet-registration-path (%v) in %s", sawPodsMount, sawRegPath, ds.Name)
	}
}

// expandEnv expands $(NAME) from plain env values, as the kubelet does for args.
func expandEnv(s string, env []corev1.EnvVar) string {
	for _, e := range env {
		s = strings.ReplaceAll(s, "$("+e.Name+")", e.Value)
	}
	return s
}

// TestConventions checks what every rendering (kustomizations and the chart)
// must have: the recommended labels, Pod Security Admission labels that admit
// the pods, the node selector, the default container, an explicit grace
// period, and the names the e2e suite (kind/e2e/harness.go) relies on.
func TestConventions(t *testing.T) {
	renderings := map[string][]object{
		"manifests/":                                           kustomize(t, "."),
		"manifests/overlays/in-process":                        kustomize(t, filepath.Join("overlays", "in-process")),
		"manifests/overlays/without-rolling-update":            kustomize(t, filepath.Join("overlays", "without-rolling-update")),
		"helm template manifests/chart":                        helmTemplate(t, nil),
		"helm template manifests/chart --set image.tag=v1.2.3": helmTemplate(t, map[string]any{"image": map[string]any{"tag": "v1.2.3"}}),
		"helm template manifests/chart --set rollingUpdate.enabled=false": helmTemplate(t,
			map[string]any{"rollingUpdate": map[string]any{"enabled": false}}),
	}
	for overlay := range kubeletRoots {
		renderings["manifests/overlays/"+overlay] = kustomize(t, filepath.Join("overlays", overlay))
	}
	for name, objs := range renderings {
		t.Run(name, func(t *testing.T) {
			nss, drivers, dss := typed(t, objs)
			if len(nss) != 1 || len(drivers) != 1 || len(dss) != 1 {
				t.Fatalf("want one Namespace, CSIDriver and DaemonSet; got %d, %d, %d", len(nss), len(drivers), len(dss))
			}
			ns, drv, ds := nss[0], drivers[0], dss[0]
			// The names kind/e2e/harness.go hard-codes.
			if ns.Name != "csi-registrar" || ds.Namespace != ns.Name || ds.Name != "csi-stub-node" ||
				ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "csi-stub-node" || len(ds.Spec.Selector.MatchLabels) != 1 {
				t.Errorf("namespace %s, DaemonSet %s/%s, selector %v: the e2e suite expects csi-registrar, csi-stub-node, app.kubernetes.io/name=csi-stub-node",
					ns.Name, ds.Namespace, ds.Name, ds.Spec.Selector.MatchLabels)
			}
			spec := ds.Spec.Template.Spec
			if spec.Containers[0].Name != "driver" || (len(spec.Containers) > 1 && spec.Containers[1].Name != "registrar") {
				t.Errorf("containers[0] must be driver and containers[1] registrar (kind/e2e/overlays/retry patches by index)")
			}

			// Recommended labels, the version label equal to the image's tag.
			tag := ""
			for _, c := range spec.Containers {
				_, tag, _ = strings.Cut(c.Image, ":")
			}
			wantLabels := map[string]string{
				"app.kubernetes.io/instance": releaseName,
				"app.kubernetes.io/version":  tag,
				"app.kubernetes.io/part-of":  "csi-registrar",
			}
			for what, labels := range map[string]map[string]string{
				"Namespace " + ns.Name:       ns.Labels,
				"CSIDriver " + drv.Name:      drv.Labels,
				"DaemonSet " + ds.Name:       ds.Labels,
				"pod template of " + ds.Name: ds.Spec.Template.Labels,
			} {
				for k, v := range wantLabels {
					if labels[k] != v {
						t.Errorf("%s: label %s=%q, want %q", what, k, labels[k], v)
					}
				}
				if !strings.HasPrefix(what, "Namespace") && labels["app.kubernetes.io/component"] == "" {
					t.Errorf("%s: no app.kubernetes.io/component label", what)
				}
			}
			for k, v := range ds.Spec.Selector.MatchLabels {
				if ds.Spec.Template.Labels[k] != v || ds.Labels[k] != v {
					t.Errorf("selector label %s=%s missing on the DaemonSet or its pod template", k, v)
				}
			}

			// Pod Security Admission: the namespace must admit the pod.
			privileged := false
			for _, c := range spec.Containers {
				if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
					privileged = true
				}
			}
			for _, mode := range []string{"enforce", "warn", "audit"} {
				level := ns.Labels["pod-security.kubernetes.io/"+mode]
				if privileged && level != "privileged" {
					t.Errorf("a container is privileged but the namespace's pod-security.kubernetes.io/%s is %q, not privileged", mode, level)
				}
				if level == "" {
					t.Errorf("namespace %s: no pod-security.kubernetes.io/%s label", ns.Name, mode)
				}
			}

			if spec.NodeSelector["kubernetes.io/os"] != "linux" {
				t.Errorf("nodeSelector %v: want kubernetes.io/os: linux", spec.NodeSelector)
			}
			if spec.TerminationGracePeriodSeconds == nil {
				t.Errorf("no explicit terminationGracePeriodSeconds")
			}
			dc := ds.Spec.Template.Annotations["kubectl.kubernetes.io/default-container"]
			found := false
			for _, c := range spec.Containers {
				found = found || c.Name == dc
			}
			if !found {
				t.Errorf("kubectl.kubernetes.io/default-container %q names no container", dc)
			}
		})
	}
}

// TestStatusClusterRoles: manifests/ and the chart grant
// `kubectl csi-registrar status` exactly the rules it uses
// (internal/clusterstatus.Rules): the required ones in
// csi-registrar-status, the optional proxies in csi-registrar-status-proxy.
func TestStatusClusterRoles(t *testing.T) {
	want := map[string]map[string]bool{} // role -> "group resource verb"
	for _, r := range clusterstatus.Rules {
		role := "csi-registrar-status"
		if r.Optional {
			role += "-proxy"
		}
		if want[role] == nil {
			want[role] = map[string]bool{}
		}
		for _, v := range r.Verbs {
			want[role][r.Group+" "+r.Resource+" "+v] = true
		}
	}
	for name, objs := range map[string][]object{
		"kubectl kustomize manifests/":  kustomize(t, "."),
		"helm template manifests/chart": helmTemplate(t, nil),
	} {
		got := map[string]map[string]bool{}
		for _, o := range objs {
			if o["kind"] != "ClusterRole" {
				continue
			}
			b, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var cr rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(b, &cr); err != nil {
				t.Fatal(err)
			}
			got[cr.Name] = map[string]bool{}
			for _, r := range cr.Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							got[cr.Name][g+" "+res+" "+v] = true
						}
					}
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: ClusterRoles differ from internal/clusterstatus.Rules (-want +got):\n%s", name, diff)
		}
	}
	if objs := helmTemplate(t, map[string]any{"statusClusterRoles": false}); len(objs) != len(helmTemplate(t, nil))-2 {
		t.Errorf("--set statusClusterRoles=false: %d objects, want the two ClusterRoles fewer", len(objs))
	}
}

// TestNodeReadiness: nodeReadiness.enabled=true renders what
// overlays/node-readiness/ (manifests/ with components/node-readiness/)
// renders; without it no object gives the pod a token or API access.
func TestNodeReadiness(t *testing.T) {
	fromOverlay := kustomize(t, filepath.Join("overlays", "node-readiness"))
	diffObjects(t, "kubectl kustomize overlays/node-readiness", fromOverlay, "helm template --set nodeReadiness.enabled=true",
		helmTemplate(t, map[string]any{"nodeReadiness": map[string]any{"enabled": true}}))
	var base []object // without the component's kinds, which typed does not take
	for _, o := range fromOverlay {
		switch o["kind"] {
		case "ServiceAccount", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		default:
			base = append(base, o)
		}
	}
	_, _, dss := typed(t, base)
	spec := dss[0].Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken || spec.ServiceAccountName != "csi-stub-node" {
		t.Errorf("node-readiness: the pod must mount the token of csi-stub-node: automount %v, account %q", spec.AutomountServiceAccountToken, spec.ServiceAccountName)
	}
	for _, dir := range []string{".", filepath.Join("overlays", "without-rolling-update")} {
		objs := kustomize(t, dir)
		for _, o := range objs {
			switch o["kind"] {
			case "ServiceAccount", "ClusterRoleBinding", "ValidatingAdmissionPolicy":
				t.Errorf("%s renders %s without the node-readiness component", dir, o.key())
			}
		}
		_, _, dss := typed(t, objs)
		if a := dss[0].Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("%s: automountServiceAccountToken %v, want false: without the component the pod has no token", dir, a)
		}
	}
}
