package e2ebinary

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noGo is a go command that does not exist: a Build that runs the go
// command fails with it.
const noGo = "/nonexistent/go"

func writeExec(t *testing.T, path, script string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestBuildCurrent: a binary built by the same recipe is returned as it is,
// without the go command; one of another recipe, without its stamp or not
// executable is built again (here: the go command is looked for and the
// build fails without it).
func TestBuildCurrent(t *testing.T) {
	r, _ := ParseRelease("v1.37.2")
	for _, tc := range []struct {
		name    string
		stamp   string
		mode    os.FileMode
		current bool
	}{
		{"same recipe", stamp(r), 0o755, true},
		{"no stamp", "", 0o755, false},
		{"another recipe", strings.Replace(stamp(r), "recipe "+recipeRevision, "recipe 0", 1), 0o755, false},
		{"another release", stamp(Release{Major: 1, Minor: 36, Patch: 4}), 0o755, false},
		{"not executable", stamp(r), 0o644, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			bin := Path(cache, r)
			writeExec(t, bin, "#!/bin/sh\necho v1.37.2\n")
			if err := os.Chmod(bin, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.stamp != "" {
				if err := os.WriteFile(filepath.Join(filepath.Dir(bin), "stamp"), []byte(tc.stamp), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Build(context.Background(), Options{Release: r, CacheDir: cache, Go: noGo})
			if tc.current {
				if err != nil || got.Path != bin || got.Built {
					t.Errorf("Build = %+v, %v; want %s as it is", got, err, bin)
				}
				return
			}
			var le *LookUpError
			if !errors.As(err, &le) || !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Build = %+v, %v; want it to run the go command (%s, absent)", got, err, noGo)
			}
		})
	}
}

// TestBuildModuleDir: a module given to build in must require the release;
// that is checked before the go command runs.
func TestBuildModuleDir(t *testing.T) {
	r, _ := ParseRelease("v1.36.4")
	_, err := Build(context.Background(), Options{Release: r, CacheDir: t.TempDir(), Go: noGo, ModuleDir: filepath.Join(k8sbuild, "1.37")})
	if err == nil || !strings.Contains(err.Error(), "requires k8s.io/kubernetes v1.37.2, not v1.36.4") {
		t.Errorf("Build in 1.37/ for v1.36.4: %v", err)
	}
	_, err = Build(context.Background(), Options{Release: r, CacheDir: t.TempDir(), Go: noGo, ModuleDir: t.TempDir()})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Build in a directory without go.mod: %v", err)
	}
}

// TestLock: a second holder waits for the first, and gives up when its
// context ends.
func TestLock(t *testing.T) {
	file := filepath.Join(t.TempDir(), "build.lock")
	unlock, err := lock(context.Background(), file, noLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := lock(ctx, file, noLog()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want the deadline", err)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		unlock()
	}()
	start := time.Now()
	unlock2, err := lock(context.Background(), file, noLog())
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Errorf("took the lock after %s, before the first holder let go", waited)
	}
}

// TestLdflags: the release is stamped as Kubernetes stamps it; a
// pre-release's minor version carries a "+".
func TestLdflags(t *testing.T) {
	r, _ := ParseRelease("v1.38.0-alpha.1")
	got := ldflags(r, "2026-08-06T12:24:56Z")
	for _, want := range []string{"-s -w ", "-X k8s.io/component-base/version.gitVersion=v1.38.0-alpha.1 ", "-X k8s.io/client-go/pkg/version.gitMinor=38+ ",
		"-X k8s.io/component-base/version.buildDate=2026-08-06T12:24:56Z "} {
		if !strings.Contains(got+" ", want) {
			t.Errorf("ldflags %q lack %q", got, want)
		}
	}
}
