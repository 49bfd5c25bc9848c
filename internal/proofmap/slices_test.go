package proofmap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaleCountsCommitsOnTheSlicesPaths: in a repository of its own, a
// slice goes stale after more than max commits under its paths, and
// commits elsewhere do not count.
func TestStaleCountsCommitsOnTheSlicesPaths(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := git(dir, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	commit := func(file string) string {
		t.Helper()
		p := filepath.Join(dir, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(p, append(b, 'x'), 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", file)
		run("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", file)
		return run("rev-parse", "HEAD")
	}
	run("init", "-q")
	green := map[int]GreenRun{1: {Slice: 1, Commit: commit("registrar/a.go"), Date: "2026-11-28", Seconds: 1}}
	slices := []Slice{{N: 1, Title: "one", Paths: []string{"registrar"}}, {N: 2, Title: "two", Paths: []string{"kind"}}}

	commit("docs/x.md")
	commit("registrar/a.go")
	commit("registrar/a.go")
	errs, err := Stale(dir, slices, green, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "slice 2") {
		t.Fatalf("2 commits on slice 1's paths (max 2), slice 2 never green: got %q, want only slice 2's error", errs)
	}
	commit("registrar/b.go")
	errs, err = Stale(dir, slices[:1], green, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "3 commits touched its paths") {
		t.Fatalf("3 commits on slice 1's paths (max 2): got %q, want it stale", errs)
	}
	green[1] = GreenRun{Slice: 1, Commit: "0123456789abcdef0123456789abcdef01234567"}
	if errs, _ = Stale(dir, slices[:1], green, 2); len(errs) != 1 || !strings.Contains(errs[0], "not an ancestor") {
		t.Fatalf("a green commit not in the history: got %q", errs)
	}
}
