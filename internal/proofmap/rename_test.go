package proofmap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shadowTree returns a tree that is the checkout but for the files given:
// every other entry a symlink to the checkout's.
func shadowTree(t *testing.T, files map[string]string) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var link func(rel string) // rel: a directory on the path of a replaced file
	link = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(abs, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(tmp, rel), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(rel, e.Name())
			if _, ok := files[p]; ok {
				continue
			}
			under := false
			for f := range files {
				under = under || strings.HasPrefix(f, p+"/")
			}
			if under {
				link(p)
				continue
			}
			if err := os.Symlink(filepath.Join(abs, p), filepath.Join(tmp, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	link(".")
	for f, text := range files {
		if err := os.WriteFile(filepath.Join(tmp, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErrs(t *testing.T, errs []string, want ...string) {
	t.Helper()
	all := strings.Join(errs, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("the check's messages lack %q; they are:\n%s", w, all)
		}
	}
}

// A mapped e2e test renamed: its rows name a test that does not exist, and
// the new name comes with its rows to paste.
func TestProofMapRenamedTest(t *testing.T) {
	const f = "kind/e2e/status_test.go"
	src := read(t, f)
	if !strings.Contains(src, "func TestStatus(") {
		t.Skip("kind/e2e has no TestStatus to rename")
	}
	tree := shadowTree(t, map[string]string{f: strings.Replace(src, "func TestStatus(", "func TestStatusRenamed(", 1)})
	errs, err := checkTree(tree, filepath.Join(tree, "docs/development.md"))
	if err != nil {
		t.Fatal(err)
	}
	wantErrs(t, errs, `e2e "TestStatus" does not exist`, "| `TestStatusRenamed` | e2e | `make e2e` | PASS |  |")
}

// A step whose -test.run changes: the map's rows for it no longer match.
func TestProofMapStepSelection(t *testing.T) {
	ci := read(t, ".ci/run")
	old := "-test.run='^(TestKubeletDeregistration|TestRollingUpdate)"
	if !strings.Contains(ci, old) {
		t.Skip(".ci/run no longer runs the K8S_PATCH step with this -test.run")
	}
	tree := shadowTree(t, map[string]string{".ci/run": strings.Replace(ci, old, "-test.run='^(TestKubeletDeregistration)", 1)})
	errs, err := checkTree(tree, filepath.Join(tree, "docs/development.md"))
	if err != nil {
		t.Fatal(err)
	}
	wantErrs(t, errs, `the map says step "make e2e K8S_PATCH=csi-deregister-by-endpoint" runs e2e TestRollingUpdate, but the step`)
}

// A proof no row names.
func TestProofMapUnmapped(t *testing.T) {
	const f = "docs/development.md"
	doc := read(t, f)
	row := "| `e2e-matrix` | target |"
	i := strings.Index(doc, row)
	if i < 0 {
		t.Skip("the map has no e2e-matrix row")
	}
	j := i + strings.Index(doc[i:], "\n") + 1
	tree := shadowTree(t, map[string]string{f: doc[:i] + doc[j:]})
	errs, err := checkTree(tree, filepath.Join(tree, f))
	if err != nil {
		t.Fatal(err)
	}
	wantErrs(t, errs, "proofs not in the map", "| `e2e-matrix` | target | not in CI: <where it runs and why> | - |  |")
}
