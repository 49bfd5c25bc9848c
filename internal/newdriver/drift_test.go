package newdriver

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// driftAllowed are the reviewed differences between what csi-registrar's
// manifests render (manifests/base and its overlays in-process and
// without-rolling-update) and what a project generated for the same driver
// name renders (its manifests/, in-process/, without-rolling-update/), by
// path: "<Kind> <field path>", lists of named items by name ([driver]),
// lists of strings by the item there only ([-base's], [+the project's]). A
// path allows what is under it. Anything else that differs fails
// TestDaemonSetDrift: the generated manifests deploy as csi-registrar's do.
// The edits that make them are baseedits.go's (and the overlays' templates).
var driftAllowed = map[string]string{
	"ClusterRole":             "rbac: the status ClusterRoles are csi-registrar's, cluster-wide",
	"Namespace metadata.name": "namespace: the project's own",
	"Namespace metadata.labels.app.kubernetes.io/part-of":                                                                 "part-of: the project's",
	"CSIDriver metadata.labels.app.kubernetes.io/part-of":                                                                 "part-of: the project's",
	"DaemonSet metadata.namespace":                                                                                        "namespace: the project's own",
	"DaemonSet metadata.labels.app.kubernetes.io/part-of":                                                                 "part-of: the project's",
	"DaemonSet spec.template.metadata.labels.app.kubernetes.io/part-of":                                                   "part-of: the project's",
	"DaemonSet spec.template.spec.containers[driver].image":                                                               "driver-image: the project's image; base runs the driver from csi-registrar's",
	"DaemonSet spec.template.spec.containers[driver].command":                                                             "driver-command: base runs /csi-registrar driver; the project's image has its binary as entrypoint",
	"DaemonSet spec.template.spec.containers[driver].args[-" + "--endpoint=unix:///csi/$(POD_UID).sock]":                  "endpoint: the project's -endpoint reads CSI_ENDPOINT",
	"DaemonSet spec.template.spec.containers[driver].args[-" + "--endpoint=unix:///csi/csi.sock]":                         "endpoint (without-rolling-update): CSI_ENDPOINT is csi.sock there",
	"DaemonSet spec.template.spec.containers[driver].args[+--endpoint=$(CSI_ENDPOINT)]":                                   "endpoint",
	"DaemonSet spec.template.spec.containers[driver].args[+--kubelet-pods-dir=/var/lib/kubelet/pods]":                     "kubelet-pods-dir: named, not the default",
	"DaemonSet spec.template.spec.containers[driver].args[-" + "--state-dir=/var/lib/csi-registrar/stub.csi.example.com]": "state-dir: under /var/lib/<binary>/",
	"DaemonSet spec.template.spec.containers[driver].args[+--state-dir=/var/lib/csi-stub/stub.csi.example.com]":           "state-dir",
	"DaemonSet spec.template.spec.containers[driver].volumeMounts[state-dir].mountPath":                                   "state-dir",
	"DaemonSet spec.template.spec.volumes[state-dir].hostPath.path":                                                       "state-dir",
	"DaemonSet spec.template.spec.containers[driver].env[CSI_REGISTRAR_PROBE_CSI_ADDRESS]":                                "probe-env: csi-registrar probe's variable",
	"DaemonSet spec.template.spec.containers[driver].env[CSI_ENDPOINT]":                                                   "probe-env: the project's -probe and -endpoint read CSI_ENDPOINT",
	"DaemonSet spec.template.spec.containers[driver].livenessProbe.exec.command":                                          "probe-command: each binary's own probe (without-rolling-update: base's names csi.sock, the project's reads CSI_ENDPOINT)",
}

// driftVariants pair csi-registrar's kustomizations with the generated
// project's.
var driftVariants = []struct{ ours, generated string }{
	{"manifests/base", "manifests"},
	{"manifests/overlays/in-process", "manifests/in-process"},
	{"manifests/overlays/without-rolling-update", "manifests/without-rolling-update"},
}

// TestDaemonSetDrift renders csi-registrar's manifests/base and overlays
// and those of a project generated for stub.csi.example.com and fails on
// any difference between their objects outside driftAllowed, and on an
// allowed path that no longer differs in any variant (the list stays
// reviewed). It compares the outputs, not the edits: an edit of
// baseedits.go, or a template of the overlays, that changes more than the
// list allows fails here.
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
	used := map[string]bool{}
	for _, v := range driftVariants {
		t.Run(v.generated, func(t *testing.T) {
			ours := renderObjects(t, filepath.Join("..", "..", filepath.FromSlash(v.ours)))
			generated := renderObjects(t, filepath.Join(dir, filepath.FromSlash(v.generated)))
			diffs := map[string][2]any{}
			diffObjects(ours, generated, diffs)
			var bad []string
			for p := range diffs {
				allowed := ""
				for a := range driftAllowed {
					if p == a || strings.HasPrefix(p, a+".") || strings.HasPrefix(p, a+"[") || strings.HasPrefix(p, a+" ") {
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
				t.Errorf("%s (%s) differs from %s at %s: %s there, %s here", v.generated, o.Module, v.ours, p, show2(diffs[p][0]), show2(diffs[p][1]))
			}
			t.Logf("%d differences, %d outside driftAllowed", len(diffs), len(bad))
		})
	}
	for a := range driftAllowed {
		if !used[a] {
			t.Errorf("driftAllowed lists %s, which no longer differs in any variant: remove it", a)
		}
	}
}

// renderObjects runs kustomize on dir and returns its objects by kind (by
// "kind name" when a kind has several).
func renderObjects(t *testing.T, dir string) map[string]any {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	count := map[string]int{}
	for _, r := range m.Resources() {
		count[r.GetKind()]++
	}
	out := map[string]any{}
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		key := r.GetKind()
		if count[key] > 1 {
			key += " " + r.GetName()
		}
		out[key] = v
	}
	if out["DaemonSet"] == nil {
		t.Fatalf("%s renders no DaemonSet", dir)
	}
	return out
}

// diffObjects adds to out the paths where two renders differ, with the
// value on each side (nil: absent).
func diffObjects(a, b map[string]any, out map[string][2]any) {
	for _, k := range unionKeys(a, b) {
		diffPaths(k, a[k], b[k], out)
	}
}

func unionKeys(a, b map[string]any) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// diffPaths adds the paths below prefix where a and b differ: a leaf, a
// value on one side only, a named list item by name ([name]), a string of a
// list of strings by the string on one side ([-a's], [+b's]).
func diffPaths(prefix string, a, b any, out map[string][2]any) {
	join := func(k string) string {
		if strings.Contains(prefix, " ") {
			return prefix + "." + k
		}
		return prefix + " " + k // after the kind
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			out[prefix] = [2]any{a, b}
			return
		}
		for _, k := range unionKeys(av, bv) {
			diffPaths(join(k), av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			out[prefix] = [2]any{a, b}
			return
		}
		if an, bn := byName(av), byName(bv); an != nil && bn != nil {
			for _, k := range unionKeys(an, bn) {
				diffPaths(prefix+"["+k+"]", an[k], bn[k], out)
			}
			return
		}
		if as, bs := strs(av), strs(bv); as != nil && bs != nil {
			for _, s := range as {
				if !slices.Contains(bs, s) {
					out[prefix+"[-"+s+"]"] = [2]any{s, nil}
				}
			}
			for _, s := range bs {
				if !slices.Contains(as, s) {
					out[prefix+"[+"+s+"]"] = [2]any{nil, s}
				}
			}
			if slices.Equal(slices.Sorted(slices.Values(as)), slices.Sorted(slices.Values(bs))) && !slices.Equal(as, bs) {
				out[prefix] = [2]any{a, b} // the same strings in another order
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		out[prefix] = [2]any{a, b}
	}
}

// byName maps a list of objects that each have a distinct name by name;
// nil otherwise.
func byName(l []any) map[string]any {
	m := map[string]any{}
	for _, item := range l {
		o, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		name, ok := o["name"].(string)
		if _, dup := m[name]; !ok || dup {
			return nil
		}
		m[name] = o
	}
	return m
}

// strs is a list of strings as such; nil otherwise.
func strs(l []any) []string {
	s := []string{}
	for _, item := range l {
		v, ok := item.(string)
		if !ok {
			return nil
		}
		s = append(s, v)
	}
	return s
}

func show2(v any) string {
	if v == nil {
		return "absent"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
