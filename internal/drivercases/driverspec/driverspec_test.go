package driverspec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const underTest = "csi-registrar:dev"

// upstreamStyle returns the objects of manifests/examples/upstream-style as
// kustomize would render them, less the namespace and the images: transformers
// (which do not matter here).
func upstreamStyle(t *testing.T) []byte {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "manifests", "examples", "upstream-style")
	var docs []string
	for _, f := range []string{"namespace.yaml", "csidriver.yaml", "node.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return []byte(strings.Join(docs, "\n---\n"))
}

func mustParse(t *testing.T, rendered []byte) *Spec {
	t.Helper()
	s, err := Parse(rendered, underTest)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseUpstreamStyle(t *testing.T) {
	s := mustParse(t, upstreamStyle(t))
	if len(s.Swaps) != 1 {
		t.Fatalf("swaps %v, want one", s.Swaps)
	}
	sw := s.Swaps[0]
	if sw.Container != "node-driver-registrar" || sw.From != "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0" || sw.To != underTest || sw.PullPolicy != "" {
		t.Errorf("swap %+v", sw)
	}
	for name, got := range map[string][2]string{
		"Registrar":        {s.Registrar, "node-driver-registrar"},
		"DriverName":       {s.DriverName, "upstream-style.csi.example.com"},
		"DriverNameFrom":   {s.DriverNameFrom, "the CSIDriver object"},
		"CSIAddress":       {s.CSIAddress, "/csi/csi.sock"},
		"RegistrationPath": {s.RegistrationPath, "/var/lib/kubelet/plugins/upstream-style.csi.example.com/csi.sock"},
		"HostSocket":       {s.HostSocket, "/var/lib/kubelet/plugins/upstream-style.csi.example.com/csi.sock"},
		"HTTPPort":         {s.HTTPPort, ""},
		"Namespace":        {s.Namespace, "default"},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %q, want %q", name, got[0], got[1])
		}
	}
	if p := s.Problems(); len(p) != 0 {
		t.Errorf("problems %q, want none", p)
	}
}

// Only the registrar's image changes: every other field of every object,
// the registrar's args and probe included, is as written.
func TestParseChangesOnlyTheImage(t *testing.T) {
	in := upstreamStyle(t)
	s := mustParse(t, in)
	out, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want, err := splitObjects(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := splitObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	ds := want[2]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	ds["containers"].([]any)[0].(map[string]any)["image"] = underTest
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("objects differ beyond the registrar image:\ngot  %s\nwant %s", g, w)
	}
	if !strings.Contains(string(out), "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)") {
		t.Errorf("the registrar's args were rewritten:\n%s", out)
	}
}

// The broken example (manifests/examples/upstream-style-broken): the
// registration path is the socket's path inside the container.
func TestProblemsWrongRegistrationPath(t *testing.T) {
	in := strings.Replace(string(upstreamStyle(t)),
		"value: /var/lib/kubelet/plugins/upstream-style.csi.example.com/csi.sock", "value: /csi/csi.sock", 1)
	s := mustParse(t, []byte(in))
	p := s.Problems()
	if len(p) != 1 {
		t.Fatalf("problems %q, want one", p)
	}
	for _, want := range []string{
		"--kubelet-registration-path=/csi/csi.sock is not the driver's socket on the node",
		"--csi-address=/csi/csi.sock is /var/lib/kubelet/plugins/upstream-style.csi.example.com/csi.sock there",
		"volume socket-dir (hostPath /var/lib/kubelet/plugins/upstream-style.csi.example.com)",
		"fix: --kubelet-registration-path=/var/lib/kubelet/plugins/upstream-style.csi.example.com/csi.sock",
	} {
		if !strings.Contains(p[0], want) {
			t.Errorf("problem %q does not say %q", p[0], want)
		}
	}
}

const minimal = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node, namespace: kube-system}
spec:
  selector: {matchLabels: {app: x}}
  template:
    spec:
      containers:
      - name: reg
        image: REGISTRAR
        imagePullPolicy: Always
        args: [ARGS]
        volumeMounts: [{name: sock, mountPath: /plugin/}, {name: reg, mountPath: /registration}]
      - name: liveness-probe
        image: registry.k8s.io/sig-storage/livenessprobe:v2.15.0
        volumeMounts: [{name: sock, mountPath: /plugin}]
      - name: drv
        image: example.com/driver:v1
        volumeMounts: [{name: sock, mountPath: /plugin}]
      volumes:
      - {name: sock, hostPath: {path: /var/lib/kubelet/plugins/x.example.com/}}
      - {name: reg, hostPath: {path: /var/lib/kubelet/plugins_registry}}
`

func minimalWith(registrar, args string) []byte {
	return []byte(strings.NewReplacer("REGISTRAR", registrar, "ARGS", args).Replace(minimal))
}

func TestParseFlagsAndPullPolicy(t *testing.T) {
	s := mustParse(t, minimalWith("localhost:5000/mirror/csi-node-driver-registrar@sha256:0123",
		`"--csi-address", "unix:///plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock", "--driver-name=x.example.com", "--http-endpoint=:9809"`))
	if s.Swaps[0].PullPolicy != "Always" || !strings.Contains(s.Swaps[0].String(), "imagePullPolicy Always -> IfNotPresent") {
		t.Errorf("swap %v: want the pull policy Always changed", s.Swaps[0])
	}
	if s.CSIAddress != "/plugin/csi.sock" || s.HostSocket != "/var/lib/kubelet/plugins/x.example.com/csi.sock" {
		t.Errorf("CSIAddress %q HostSocket %q", s.CSIAddress, s.HostSocket)
	}
	if s.DriverName != "x.example.com" || s.DriverNameFrom != "--driver-name of container reg" {
		t.Errorf("driver name %q from %q", s.DriverName, s.DriverNameFrom)
	}
	if s.HTTPPort != "9809" || s.Namespace != "kube-system" {
		t.Errorf("HTTPPort %q Namespace %q", s.HTTPPort, s.Namespace)
	}
	if p := s.Problems(); len(p) != 0 {
		t.Errorf("problems %q", p)
	}
}

// Without --driver-name or a single CSIDriver, the name is left to GetInfo.
func TestParseNoDriverName(t *testing.T) {
	in := string(minimalWith("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
		`"--csi-address=/plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock"`))
	two := in + "---\n{apiVersion: storage.k8s.io/v1, kind: CSIDriver, metadata: {name: a.example.com}}\n---\n{apiVersion: storage.k8s.io/v1, kind: CSIDriver, metadata: {name: b.example.com}}\n"
	for _, doc := range []string{in, two} {
		s := mustParse(t, []byte(doc))
		if s.DriverName != "" || s.DriverNameFrom != "" {
			t.Errorf("driver name %q from %q, want none (%d CSIDrivers)", s.DriverName, s.DriverNameFrom, len(s.CSIDrivers))
		}
	}
}

func TestParseErrors(t *testing.T) {
	args := `"--csi-address=/plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock"`
	ok := string(minimalWith("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0", args))
	windows := strings.Replace(strings.Replace(ok, "name: node,", "name: node-win,", 1), "    spec:\n", "    spec:\n      nodeSelector: {kubernetes.io/os: windows}\n", 1)
	for _, c := range []struct {
		name, in, want string
	}{
		{"no registrar, no plugins_registry", strings.Replace(string(minimalWith("example.com/mydriver:v1", args)), "{name: reg, hostPath: {path: /var/lib/kubelet/plugins_registry}}", "{name: reg, emptyDir: {}}", 1), `and no container image's repository ends in "node-driver-registrar"`},
		{"two DaemonSets", ok + "---\n" + strings.Replace(ok, "name: node,", "name: node2,", 1), "2 workloads mount the kubelet's <kubelet root>/plugins_registry (DaemonSet kube-system/node, DaemonSet kube-system/node2)"},
		{"no plugins_registry", strings.Replace(ok, "{name: reg, hostPath: {path: /var/lib/kubelet/plugins_registry}}", "{name: reg, emptyDir: {}}", 1), "no DaemonSet, StatefulSet or Deployment for Linux nodes mounts the kubelet's <kubelet root>/plugins_registry from the node (a hostPath volume), so the registrar containers found (DaemonSet kube-system/node, container reg"},
		{"no registration path", string(minimalWith("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0", `"--csi-address=/plugin/csi.sock"`)), "no --kubelet-registration-path"},
		{"not an object", "just: text\n", "document 1 has no kind"},
		{"empty", "---\n", "the manifests render no object"},
	} {
		_, err := Parse([]byte(c.in), underTest)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
	// A Windows DaemonSet next to the Linux one is swapped, not checked.
	s := mustParse(t, []byte(ok+"---\n"+windows))
	if len(s.Swaps) != 2 || s.Workload.Name != "node" {
		t.Errorf("swaps %v, workload %s: want both swapped, node checked", s.Swaps, s.Workload)
	}
}

// A csi-registrar sidecar (the image's register entrypoint, as make
// new-driver's manifests run it) is the registrar, swapped like upstream's;
// csi-registrar running its driver command is not.
func TestParseCSIRegistrarSidecar(t *testing.T) {
	args := `"--csi-address=/plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock"`
	for _, c := range []struct {
		name, image, command, registrar string
	}{
		{"entrypoint", "ghcr.io/example/csi-registrar:v0.1.0", "", "reg"},
		{"register command", "csi-registrar", `["/csi-registrar", "register"]`, "reg"},
		{"driver command", "csi-registrar", `["/csi-registrar", "driver"]`, ""},
		{"another image", "example.com/csi-registrar-fork:v1", "", ""},
	} {
		in := string(minimalWith(c.image, args))
		if c.command != "" {
			in = strings.Replace(in, "        args: [", "        command: "+c.command+"\n        args: [", 1)
		}
		s, err := Parse([]byte(in), underTest)
		if c.registrar == "" {
			if s != nil && s.Registrar != "" {
				t.Errorf("%s: registrar %q, want none", c.name, s.Registrar)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Registrar != c.registrar || len(s.Swaps) != 1 || s.Swaps[0].To != underTest || s.RegistrationPath == "" {
			t.Errorf("%s: registrar %q, swaps %v, registration path %q: want %s swapped to %s", c.name, s.Registrar, s.Swaps, s.RegistrationPath, c.registrar, underTest)
		}
	}
}

func TestIsUpstreamRegistrar(t *testing.T) {
	for image, want := range map[string]bool{
		"registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0":   true,
		"registry.k8s.io/sig-storage/csi-node-driver-registrar@sha256:ab": true,
		"localhost:5000/node-driver-registrar":                            true,
		"localhost:5000/node-driver-registrar-fork:v1":                    false,
		"csi-registrar:dev": false,
		"registry.k8s.io/sig-storage/livenessprobe:v2.15.0": false,
	} {
		if got := IsUpstreamRegistrar(image); got != want {
			t.Errorf("IsUpstreamRegistrar(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "/a", "B": "b"}
	for in, want := range map[string]string{
		"$(A)/csi.sock": "/a/csi.sock",
		"$(A)$(B)":      "/ab",
		"$$(A)":         "$(A)",
		"$(MISSING)":    "$(MISSING)",
		"cost $5 $":     "cost $5 $",
		"$(A":           "$(A",
	} {
		if got := Expand(in, env); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestExpandForPod: a socket path built from the pod's UID (the
// rolling-update mode) is the pod's own; fields the pod does not hold and
// variables of another container are left as written.
func TestExpandForPod(t *testing.T) {
	uid := corev1.EnvVar{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "0d8c4c6e-5b8f-4a53-9a0e-1f2a3b4c5d6e"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "driver", Env: []corev1.EnvVar{uid, {Name: "SOCK", Value: "/csi/$(POD_UID).sock"}}},
			{Name: "registrar", Env: []corev1.EnvVar{
				uid,
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			}},
		}},
	}
	for _, c := range []struct{ in, container, want string }{
		{"/var/lib/kubelet/plugins/d/$(POD_UID).sock", "registrar", "/var/lib/kubelet/plugins/d/0d8c4c6e-5b8f-4a53-9a0e-1f2a3b4c5d6e.sock"},
		{"$(NODE)", "registrar", "n1"},
		{"$(LIMIT)", "registrar", "$(LIMIT)"},
		{"$(SOCK)", "registrar", "$(SOCK)"},
		{"$(SOCK)", "driver", "/csi/0d8c4c6e-5b8f-4a53-9a0e-1f2a3b4c5d6e.sock"},
		{"$(SOCK) $(NODE)", "", "/csi/0d8c4c6e-5b8f-4a53-9a0e-1f2a3b4c5d6e.sock n1"},
	} {
		if got := ExpandForPod(c.in, pod, c.container); got != c.want {
			t.Errorf("ExpandForPod(%q, container %q) = %q, want %q", c.in, c.container, got, c.want)
		}
	}
}

// The layouts node plugins ship in: a StatefulSet (csi-driver-host-path's
// default), a Deployment (pinned or not) and a DaemonSet with a
// nodeSelector; and a driver that registers in-process (no registrar
// container to swap).
func TestParseWorkloadKinds(t *testing.T) {
	ds := string(minimalWith("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
		`"--csi-address=/plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock"`))
	for _, c := range []struct {
		name, in, kind string
		moves          bool
	}{
		{"DaemonSet with a nodeSelector", strings.Replace(ds, "    spec:\n", "    spec:\n      nodeSelector: {disk: ssd}\n", 1), "DaemonSet", false},
		{"StatefulSet", strings.Replace(ds, "kind: DaemonSet", "kind: StatefulSet", 1), "StatefulSet", true},
		{"Deployment", strings.Replace(ds, "kind: DaemonSet", "kind: Deployment", 1), "Deployment", true},
		{"pinned Deployment", strings.Replace(strings.Replace(ds, "kind: DaemonSet", "kind: Deployment", 1), "    spec:\n", "    spec:\n      nodeSelector: {kubernetes.io/hostname: n1}\n", 1), "Deployment", false},
	} {
		s, err := Parse([]byte(c.in), underTest)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.Workload.Kind != c.kind || s.Workload.Moves() != c.moves || s.Registrar != "reg" {
			t.Errorf("%s: workload %s moves %v registrar %q; want %s, moves %v, reg", c.name, s.Workload, s.Workload.Moves(), s.Registrar, c.kind, c.moves)
		}
	}
	inProcess := strings.Replace(ds, "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0", "example.com/driver:v1", 1)
	s, err := Parse([]byte(inProcess), underTest)
	if err != nil {
		t.Fatalf("in-process: %v", err)
	}
	if s.Registrar != "" || len(s.Swaps) != 0 || s.RegistrationPath != "" || len(s.Problems()) != 0 {
		t.Errorf("in-process: registrar %q swaps %v path %q problems %q; want none", s.Registrar, s.Swaps, s.RegistrationPath, s.Problems())
	}
}

func TestLabelMarksEveryObjectOnly(t *testing.T) {
	s := mustParse(t, upstreamStyle(t))
	s.Label("verify.csi-registrar.io/run", "r1")
	for _, o := range s.Objects {
		md, _ := o["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if labels["verify.csi-registrar.io/run"] != "r1" {
			t.Errorf("%v %v: labels %v, want the run label", o["kind"], md["name"], labels)
		}
		if ps := podSpecOf(o); ps != nil {
			tmpl := o["spec"].(map[string]any)["template"].(map[string]any)
			tmd, _ := tmpl["metadata"].(map[string]any)
			if l, _ := tmd["labels"].(map[string]any); l["verify.csi-registrar.io/run"] != nil {
				t.Errorf("%v: the pod template got the label too", o["kind"])
			}
		}
	}
}

// The rolling-update mode: --rolling-update with a value in the
// registrar's args (also through $(VAR) from its env), or its env variable;
// without a registrar container, in any container (in-process).
func TestRollingUpdateMode(t *testing.T) {
	reg := "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0"
	base := `"--csi-address=/plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock"`
	for _, c := range []struct {
		name, in, want string
	}{
		{"none", string(minimalWith(reg, base)), ""},
		{"arg", string(minimalWith(reg, base+`, "--rolling-update=$(POD_UID)"`)), "container reg: --rolling-update=$(POD_UID)"},
		{"arg and value", string(minimalWith(reg, base+`, "--rolling-update", "$(POD_UID)"`)), "container reg: --rolling-update"},
		{"empty value", string(minimalWith(reg, base+`, "--rolling-update="`)), ""},
		{"arg from an env value", strings.Replace(string(minimalWith(reg, base+`, "$(ROLL)"`)), "        args:", "        env: [{name: ROLL, value: --rolling-update=abc}]\n        args:", 1), "container reg: $(ROLL)"},
		{"env", strings.Replace(string(minimalWith(reg, base)), "        args:", "        env: [{name: CSI_REGISTRAR_ROLLING_UPDATE, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}]\n        args:", 1), "container reg: env CSI_REGISTRAR_ROLLING_UPDATE"},
		{"in another container than the registrar's", strings.Replace(string(minimalWith(reg, base)), "        image: example.com/driver:v1", "        image: example.com/driver:v1\n        args: [--rolling-update=x]", 1), ""},
		{"in-process", strings.Replace(strings.Replace(string(minimalWith(reg, base)), reg, "example.com/other:v1", 1), "        image: example.com/driver:v1", "        image: example.com/driver:v1\n        args: [--rolling-update=x]", 1), "container drv: --rolling-update=x"},
	} {
		s, err := Parse([]byte(c.in), underTest)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.RollingUpdate != c.want {
			t.Errorf("%s: RollingUpdate %q, want %q", c.name, s.RollingUpdate, c.want)
		}
	}
}

// The update strategy as written, defaulted as the API server does, and
// what a rollout means for it.
func TestWorkloadStrategy(t *testing.T) {
	ds := string(minimalWith("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
		`"--csi-address=/plugin/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/x.example.com/csi.sock"`))
	strategy := func(in, field, v string) string {
		return strings.Replace(in, "  template:\n", "  "+field+": "+v+"\n  template:\n", 1)
	}
	for _, c := range []struct {
		name, in, strategy, surge, rollout string
	}{
		{"DaemonSet default", ds, "RollingUpdate", "0", "the old pod is deleted before the new one starts"},
		{"DaemonSet maxSurge 1", strategy(ds, "updateStrategy", "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"), "RollingUpdate", "1", "the new pod starts beside the old one"},
		{"DaemonSet OnDelete", strategy(ds, "updateStrategy", "{type: OnDelete}"), "OnDelete", "0", "replaces no pod"},
		{"StatefulSet", strings.Replace(ds, "kind: DaemonSet", "kind: StatefulSet", 1), "RollingUpdate", "none", "replaces its pod in place"},
		{"Deployment", strings.Replace(ds, "kind: DaemonSet", "kind: Deployment", 1), "RollingUpdate", "25%", "may land on another node"},
		{"Deployment Recreate", strategy(strings.Replace(ds, "kind: DaemonSet", "kind: Deployment", 1), "strategy", "{type: Recreate}"), "Recreate", "25%", "deleted before the new one is created"},
	} {
		s, err := Parse([]byte(c.in), underTest)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		w := s.Workload
		if w.Strategy != c.strategy || w.MaxSurge != c.surge || !strings.Contains(w.Rollout(), c.rollout) {
			t.Errorf("%s: strategy %q maxSurge %q rollout %q; want %q, %q, %q", c.name, w.Strategy, w.MaxSurge, w.Rollout(), c.strategy, c.surge, c.rollout)
		}
	}
}

func TestDaemonSetIn(t *testing.T) {
	ds, err := DaemonSetIn([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: plugin\n  namespace: x\nspec:\n  template:\n    spec:\n      containers:\n      - name: driver\n        args: [--driver-name=d.example.com]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "plugin" || ds.Spec.Template.Spec.Containers[0].Args[0] != "--driver-name=d.example.com" {
		t.Errorf("DaemonSet %+v", ds)
	}
	for _, bad := range []string{
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: a\nspec:\n  nosuchfield: 1\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: a\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: b\n",
	} {
		if _, err := DaemonSetIn([]byte(bad)); err == nil {
			t.Errorf("DaemonSetIn(%q): no error", bad)
		}
	}
}
