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
