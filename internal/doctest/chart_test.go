package doctest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// TestChartReadme: manifests/chart/README.md's values table documents every
// value of manifests/chart/values.yaml with its default, and nothing else.
func TestChartReadme(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "manifests/chart/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("manifests/chart/values.yaml: %v", err)
	}
	rows, err := doctest.ValueRows(filepath.Join(root, "manifests/chart/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range doctest.CheckValues(values, rows) {
		t.Error(err)
	}
	t.Logf("%d rows checked against values.yaml", len(rows))
}

// TestValuesCaught: the chart README check fails on a value left out, a
// row of no value and a wrong default, and passes the right table.
func TestValuesCaught(t *testing.T) {
	values := map[string]any{
		"image":     map[string]any{"repository": "csi-registrar", "tag": ""},
		"grace":     float64(10),
		"resources": map[string]any{"driver": map[string]any{"cpu": "2m"}},
		"labels":    map[string]any{},
	}
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("| value | default | meaning |\n|---|---|---|\n"+
		"| `image.repository` | `csi-registrar` | right |\n"+
		"| `grace` | `30` | wrong default |\n"+
		"| `resources.driver` | requests `cpu: 2m` | a map, its own row |\n"+
		"| `image.digest` | `\"\"` | no such value |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := doctest.ValueRows(readme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, err := range doctest.CheckValues(values, rows) {
		t.Logf("caught: %v", err)
		got = append(got, strings.Fields(err.Error())[1])
	}
	// The messages' second words: the wrong default's value, the two
	// values left out, the row of no value.
	if want := "grace's image.tag labels image.digest"; strings.Join(got, " ") != want {
		t.Errorf("caught %q, want %q", strings.Join(got, " "), want)
	}
	right := append(rows[:3:3],
		doctest.ValueRow{Name: "image.tag", Default: "`\"\"`"},
		doctest.ValueRow{Name: "labels", Default: "`{}`"})
	right[1].Default = "`10`"
	if errs := doctest.CheckValues(values, right); len(errs) != 0 {
		t.Errorf("right table caught: %v", errs)
	}
}

// TestMapDefaultsCaught: the row of a map or a list must state its leaves:
// a wrong leaf, one left out, one too many, and a key on the way left out
// fail; the right rows (values.yaml's forms) pass.
func TestMapDefaultsCaught(t *testing.T) {
	resources := map[string]any{
		"requests": map[string]any{"cpu": "2m", "memory": "16Mi"},
		"limits":   map[string]any{"memory": "64Mi"},
	}
	tolerations := []any{map[string]any{"operator": "Exists"}}
	nodeSelector := map[string]any{"kubernetes.io/os": "linux"}
	for _, tc := range []struct {
		name  string
		value any
		cell  string
		ok    bool
	}{
		{"resources", resources, "requests `cpu: 2m`, `memory: 16Mi`; limits `memory: 64Mi`", true},
		{"a wrong limit", resources, "requests `cpu: 2m`, `memory: 16Mi`; limits `memory: 32Mi`", false},
		{"a leaf left out", resources, "requests `cpu: 2m`; limits `memory: 64Mi`", false},
		{"a leaf too many", resources, "requests `cpu: 2m`, `memory: 16Mi`, `ephemeral-storage: 1Gi`; limits `memory: 64Mi`", false},
		{"a key left out", resources, "`cpu: 2m`, `memory: 16Mi`; limits `memory: 64Mi`", false},
		{"a list", tolerations, "`- operator: Exists`", true},
		{"a wrong list", tolerations, "`- operator: Equal`", false},
		{"a map", nodeSelector, "`kubernetes.io/os: linux`", true},
		{"a wrong map", nodeSelector, "`kubernetes.io/os: windows`", false},
		{"an empty map", map[string]any{}, "`{}`", true},
		{"an empty map said to hold a label", map[string]any{}, "`release: prometheus`", false},
	} {
		err := doctest.CheckMapDefault(doctest.ValueRow{File: "README.md", Line: 1, Name: "x", Default: tc.cell}, "x", tc.value)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: the right row: %v", tc.name, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: the wrong row %q passed", tc.name, tc.cell)
		case !tc.ok:
			t.Logf("%s: caught: %v", tc.name, err)
		}
	}
}
