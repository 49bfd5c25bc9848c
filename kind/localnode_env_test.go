package kind_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sourceEnv sources kind/localnode/env.sh with K8S=k8s and prints the
// variables a build takes from it; out is its combined output.
func sourceEnv(t *testing.T, k8s string) (out string, code int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `source localnode/env.sh && echo "dir=${K8SBUILD_DIR##*/} version=$K8S_VERSION toolchain=$K8S_GOTOOLCHAIN"`)
	cmd.Env = append(os.Environ(), "K8S="+k8s, "LOCALNODE_K8S_VERSION=", "K8S_VERSION=", "K8S_PATCH=")
	b, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(b)), exitCode(t, err)
}

// exitCode returns the exit code of a script run by exec.Cmd's Run or
// CombinedOutput (0 when err is nil); a script that did not run fails t.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		t.Fatalf("bash: %v", err)
	}
	return 0
}

// TestLocalNodePreReleases: each pinned pre-release is selected by its full
// name from its own folder k8sbuild/pre-<version>/, beside the others of its
// minor; only the one whose go.mod names a toolchain (v1.38.0-beta.0: Go
// 1.27) gets it; the default stays the newest release folder.
func TestLocalNodePreReleases(t *testing.T) {
	for k8s, want := range map[string]string{
		"1.38.0-alpha.0": "dir=pre-1.38.0-alpha.0 version=v1.38.0-alpha.0 toolchain=",
		"1.38.0-beta.0":  "dir=pre-1.38.0-beta.0 version=v1.38.0-beta.0 toolchain=go1.27.4",
		"":               "dir=1.37 version=v1.37.2 toolchain=",
	} {
		if out, code := sourceEnv(t, k8s); code != 0 || out != want {
			t.Errorf("K8S=%q: exit %d, %q; want exit 0, %q", k8s, code, out, want)
		}
	}
}

// TestLocalNodeRefusesUnpinnedPreRelease: a pre-release not pinned, or a
// minor with only pre-releases, is refused (exit 2) naming what is pinned.
func TestLocalNodeRefusesUnpinnedPreRelease(t *testing.T) {
	for k8s, want := range map[string]string{
		"1.38.0-rc.0": "pinned pre-releases of 1.38: 1.38.0-alpha.0 1.38.0-beta.0;",
		"1.38":        "K8S=1.38.0-alpha.0 or K8S=1.38.0-beta.0",
		"1.39.0-rc.0": "pinned pre-releases of 1.39: none;",
	} {
		if out, code := sourceEnv(t, k8s); code != 2 || !strings.Contains(out, want) {
			t.Errorf("K8S=%s: exit %d, %q; want exit 2 and %q", k8s, code, out, want)
		}
	}
}
