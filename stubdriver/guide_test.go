package stubdriver_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// guideBlock returns GUIDE.md's one ```sh test block, the copy-and-rename
// commands (docs/README.md, "Tested documentation", defines the tags; the
// documentation test checks them and leaves this block to this test).
func guideBlock(t *testing.T) doctest.Block {
	t.Helper()
	blocks, err := doctest.Blocks("GUIDE.md")
	if err != nil {
		t.Fatal(err)
	}
	var run []doctest.Block
	for _, b := range blocks {
		if b.Shell() && b.Tag == doctest.Test {
			run = append(run, b)
		}
	}
	if len(run) != 1 {
		t.Fatalf("GUIDE.md has %d ```sh test blocks, want 1 (the copy-and-rename commands): %v", len(run), run)
	}
	return run[0]
}

// TestGuideRename runs GUIDE.md's copy-and-rename commands as a driver author
// would: stubdriver becomes package mydriver of a new module, driver name
// my.csi.example.com, with a main program; the new module's go vet and go
// test (its unit tests, csi-sanity, the example whose output names the
// driver) must pass. The new module starts from this checkout's build list
// and go.sum (as the guide says), so go mod tidy fetches only go.mod files
// deeper in the module graph, through the same module proxy as this test.
func TestGuideRename(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the guide test builds and tests a renamed copy of the package (about 20 s)")
	}
	block := guideBlock(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil ||
		!strings.HasPrefix(string(b), "module github.com/csi-registrar/csi-registrar\n") {
		t.Fatalf("%s is not the csi-registrar module root: %v", root, err)
	}
	work := t.TempDir()
	driver := filepath.Join(work, "mydriver")
	const (
		module = "example.com/mydriver"
		pkg    = "mydriver"
		name   = "my.csi.example.com"
	)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := append(guideEnv(),
		"CSI_REGISTRAR="+root, "DRIVER="+driver, "MODULE="+module, "PKG="+pkg, "NAME="+name,
		// The same toolchain as this test (and, inherited, its module proxy), allowed to write go.mod.
		"PATH="+goBinDir(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	start := time.Now()
	out, err := doctest.Run(ctx, block, work, env)
	t.Logf("the guide's commands took %s:\n%s", time.Since(start).Round(100*time.Millisecond), out)
	if err != nil {
		t.Fatal(err)
	}
	if want := "ok  \t" + module + "/pkg/" + pkg; !strings.Contains(string(out), want) {
		t.Errorf("go test of the renamed package did not report %q:\n%s", want, out)
	}

	// The rename is complete: nothing in the Go files still names stubdriver
	// or its driver name, and the new name is the default.
	err = filepath.WalkDir(driver, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, old := range []string{"stubdriver", "stub.csi.example.com", "csi-registrar/csi-registrar/stubdriver"} {
			if strings.Contains(string(b), old) {
				t.Errorf("%s still contains %q after the rename", p, old)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(driver, "pkg", pkg, "driver.go")); err != nil ||
		!strings.Contains(string(b), `const DefaultName = "`+name+`"`) {
		t.Errorf("driver.go does not set DefaultName to %q: %v", name, err)
	}
}

// guideEnv is the test's environment without the variables the guide's
// commands set, and without Go settings that would change what they do
// (GOPROXY stays: the guide's go mod tidy uses the proxy a driver author uses).
func guideEnv() []string {
	drop := map[string]bool{"CSI_REGISTRAR": true, "DRIVER": true, "MODULE": true, "PKG": true, "NAME": true,
		"GOFLAGS": true, "GOWORK": true, "GOTOOLCHAIN": true, "PATH": true}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	return env
}

// goBinDir is the bin directory of the toolchain running the tests ("go env
// GOROOT" of the go command on PATH when the test binary was not started by it).
func goBinDir(t *testing.T) string {
	root := os.Getenv("GOROOT")
	if root == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			t.Fatalf("go env GOROOT: %v", err)
		}
		root = strings.TrimSpace(string(out))
	}
	return filepath.Join(root, "bin")
}
