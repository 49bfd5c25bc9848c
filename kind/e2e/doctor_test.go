//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `csi-registrar doctor` on the node, against the real kubelet's registry and
// API server. The cases call these hooks (cases_test.go): after case 1 the
// node is healthy, in case 4 a stale socket is named, in case 6 the kubelet's
// rejection (a topology label collision) is named.

// runDoctor runs bin/csi-registrar doctor (built by make e2e) on node against
// the kubelet's plugins_registry, comparing with the API server through the
// kubelet's own kubeconfig (the Node authorizer's identity) when there is one,
// else the admin kubeconfig. Only the local provider runs it: there the node
// is this machine. ok is false (and the skip logged) for other providers.
func runDoctor(t *testing.T, ctx context.Context, node string, extra ...string) (code int, out string, ok bool) {
	t.Helper()
	if cl.Provider.Name() != "local" {
		t.Logf("doctor hook skipped: provider %s (it runs the binary on this machine, the local node)", cl.Provider.Name())
		return 0, "", false
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "csi-registrar")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("doctor hook: %v (make e2e builds it; else run make build)", err)
	}
	kubeconfig := filepath.Join(filepath.Dir(cl.Provider.Kubeconfig()), "kubelet.kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		kubeconfig = cl.Provider.Kubeconfig()
	}
	args := append([]string{"doctor", "--plugins-registry=" + PluginsRegistry, "--node-name=" + node, "--kubeconfig=" + kubeconfig}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("doctor: %v", err)
	}
	code = cmd.ProcessState.ExitCode()
	t.Logf("csi-registrar %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), true
}

// checkDoctor runs doctor on every node and checks its exit code and that
// its report contains each of want.
func checkDoctor(t *testing.T, ctx context.Context, wantCode int, want ...string) {
	t.Helper()
	for _, n := range allNodes {
		code, out, ok := runDoctor(t, ctx, n)
		if !ok {
			return
		}
		if code != wantCode {
			t.Errorf("doctor on %s: exit %d, want %d", n, code, wantCode)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("doctor on %s: the report lacks %q", n, w)
			}
		}
	}
}

// checkDoctorStaleSocket plants in the node's plugins_registry what a
// SIGKILLed registrar leaves (a socket nobody listens on), checks that doctor
// names it with its fix, removes it, and checks that the node is healthy.
func checkDoctorStaleSocket(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	if cl.Provider.Name() != "local" {
		runDoctor(t, ctx, node) // logs the skip
		return
	}
	stale := PluginsRegistry + "/doctor-e2e-stale-reg.sock"
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	defer os.Remove(stale)
	checkDoctor(t, ctx, 1, stale, "stale socket", "rm "+stale)
	if err := os.Remove(stale); err != nil {
		t.Fatal(err)
	}
	checkDoctor(t, ctx, 0, "healthy")
}
