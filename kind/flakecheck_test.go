package kind_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// flakeCheck runs kind/e2e/flake-check.sh with env added, and a make on
// PATH that only records that it was called (in the returned file's
// path): no run may start in these tests.
func flakeCheck(t *testing.T, env ...string) (stderr string, code int, makeCalled string) {
	t.Helper()
	shims := t.TempDir()
	makeCalled = filepath.Join(shims, "make-called")
	shim := "#!/bin/sh\necho \"$@\" >>" + makeCalled + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(shims, "make"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "e2e/flake-check.sh")
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + shims + ":" + os.Getenv("PATH"), "FLAKE_RUNS=1"}, env...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	code = exitCode(t, cmd.Run())
	return errb.String(), code, makeCalled
}

// TestFlakeCheckRefusesFullDisk: with less free space than it wants on a
// filesystem the runs write to, make flake-check exits 2 before its first
// run and before it clears bin/flake, naming the filesystem, its free
// space, the minimum and the fix. (No disk here has a million GiB free.)
func TestFlakeCheckRefusesFullDisk(t *testing.T) {
	before, beforeErr := os.Stat("../bin/flake")
	stderr, code, makeCalled := flakeCheck(t, "FLAKE_MIN_FREE_GIB=1000000")
	if code != 2 {
		t.Errorf("exit %d, want 2; stderr: %s", code, stderr)
	}
	for _, want := range []string{"not started: / has ", " GiB free; want at least FLAKE_MIN_FREE_GIB=1000000 GiB", "free space"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	if b, err := os.ReadFile(makeCalled); err == nil {
		t.Errorf("make was called before the check refused: %s", b)
	}
	after, afterErr := os.Stat("../bin/flake")
	if (beforeErr == nil) != (afterErr == nil) || beforeErr == nil && !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("bin/flake changed: before %v %v, after %v %v", before, beforeErr, after, afterErr)
	}
}

// TestFlakeCheckRefusesBadMinimum: a minimum that is not a whole number of
// GiB is refused by name, before anything runs.
func TestFlakeCheckRefusesBadMinimum(t *testing.T) {
	stderr, code, makeCalled := flakeCheck(t, "FLAKE_MIN_FREE_GIB=ten")
	if code != 2 || !strings.Contains(stderr, "FLAKE_MIN_FREE_GIB=ten: want a whole number of GiB") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming FLAKE_MIN_FREE_GIB=ten", code, stderr)
	}
	if _, err := os.Stat(makeCalled); err == nil {
		t.Error("make was called")
	}
}
