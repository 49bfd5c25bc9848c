package newdriver

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// driftAllowed are the reviewed differences between the DaemonSet of
// csi-registrar's manifests/base and the one a project generated for the
// same driver name renders (manifests/base/), by path (a path's prefix
// allows what is under it). Anything else that differs fails
// TestDaemonSetDrift: the generated manifests roll as csi-registrar's do.
var driftAllowed = map[string]string{
	"metadata.namespace":                                         "the project's own namespace",
	"metadata.labels":                                            "csi-registrar's labels name its release (component, instance, version)",
	"spec.template.metadata.labels":                              "as metadata.labels",
	"spec.template.spec.containers.0.image":                      "the project's image; base runs the driver from the csi-registrar image",
	"spec.template.spec.containers.0.command":                    "base: /csi-registrar driver; the project's image has its binary as entrypoint",
	"spec.template.spec.containers.0.args":                       "base: --max-volumes-per-node=16, --v=2, its state dir; the project: --endpoint=$(CSI_ENDPOINT), --kubelet-pods-dir (checked in TestGenerate)",
	"spec.template.spec.containers.0.env.2.name":                 "the probe's socket: csi-registrar probe reads CSI_REGISTRAR_PROBE_CSI_ADDRESS, the project's -probe reads CSI_ENDPOINT",
	"spec.template.spec.containers.0.env.2.value":                "as env.2.name (a path there, a unix:// URL here)",
	"spec.template.spec.containers.0.livenessProbe.exec.command": "each binary's own probe command; neither names a variable",
	"spec.template.spec.containers.0.volumeMounts.2.mountPath":   "the state dir: /var/lib/<binary>/<driver>",
	"spec.template.spec.volumes.3.hostPath.path":                 "as the state dir's mount",
}

// TestDaemonSetDrift renders manifests/base of this repository and of a
// project generated for stub.csi.example.com and fails on any difference
// between their DaemonSets outside driftAllowed, and on an allowed path
// that no longer differs (the list stays reviewed).
func TestDaemonSetDrift(t *testing.T) {
	o := Options{Module: "example.com/csi-stub", Driver: stubName, Dir: t.TempDir(), Source: checkout(t)}
	files, err := o.files()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ours := renderDaemonSet(t, filepath.Join("..", "..", "manifests", "base"))
	generated := renderDaemonSet(t, filepath.Join(dir, "manifests", "base"))
	diffs := map[string]bool{}
	diffPaths("", ours, generated, diffs)
	used := map[string]bool{}
	var bad []string
	for p := range diffs {
		allowed := ""
		for a := range driftAllowed {
			if p == a || len(p) > len(a) && p[:len(a)+1] == a+"." {
				allowed = a
			}
		}
		if allowed == "" {
			bad = append(bad, p)
		}
		used[allowed] = true
	}
	sort.Strings(bad)
	for _, p := range bad {
		t.Errorf("the generated DaemonSet differs from manifests/base's at %s: base %s, generated %s", p, at(ours, p), at(generated, p))
	}
	for a := range driftAllowed {
		if !used[a] {
			t.Errorf("driftAllowed lists %s, which no longer differs: remove it", a)
		}
	}
}

func renderDaemonSet(t *testing.T, dir string) map[string]any {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	for _, r := range m.Resources() {
		if r.GetKind() == "DaemonSet" {
			b, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("%s renders no DaemonSet", dir)
	return nil
}

// diffPaths adds to out the dotted paths where a and b differ: a leaf, or a
// list or map present on one side only.
func diffPaths(prefix string, a, b any, out map[string]bool) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			out[prefix] = true
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for k := range keys {
			diffPaths(join(k), av[k], bv[k], out)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			out[prefix] = true
			return
		}
		for i := range av {
			diffPaths(join(fmt.Sprint(i)), av[i], bv[i], out)
		}
	default:
		if !reflect.DeepEqual(a, b) {
			out[prefix] = true
		}
	}
}

// at returns the JSON of the value at a dotted path.
func at(v any, p string) string {
	for _, k := range splitPath(p) {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			var i int
			fmt.Sscan(k, &i)
			if i < len(x) {
				v = x[i]
			} else {
				v = nil
			}
		default:
			v = nil
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := range len(p) {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}
