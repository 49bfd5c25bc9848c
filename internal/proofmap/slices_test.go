package proofmap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlicesGreen fails when a slice of the long form (.ci/run's `slice`
// lines) has not passed for more than MaxStaleCommits commits that touched
// its paths (.ci/slices.tsv holds each slice's last green run).
func TestSlicesGreen(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here: the slices' history cannot be read")
	}
	if shallow, err := Shallow(root); err != nil {
		t.Skipf("not a git work tree (%v): the slices' history cannot be read", err)
	} else if shallow {
		t.Skip("a shallow clone: a slice's green commit may be cut from its history")
	}
	_, slices, err := ReadCI(filepath.Join(root, ".ci/run"))
	if err != nil {
		t.Fatal(err)
	}
	green, err := ReadGreen(filepath.Join(root, ".ci/slices.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	errs, err := Stale(root, slices, green, MaxStaleCommits)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
	for _, s := range slices {
		if g, ok := green[s.N]; ok {
			t.Logf("slice %d (%s): green at %s on %s, %d s", s.N, s.Title, g.Commit, g.Date, g.Seconds)
		}
	}
}

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
