package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// TestBadArguments: every bad argument exits 2 with a message naming it,
// before any API call.
func TestBadArguments(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	const reference = "../../manifests/examples/storage-e2e/stub.csi.example.com.yaml"
	out := t.TempDir()
	noName := filepath.Join(out, "no-name.yaml")
	if err := os.WriteFile(noName, []byte("DriverInfo: {}\nInlineVolumes: [{}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notE2E := filepath.Join(out, "not-e2e")
	if err := os.WriteFile(notE2E, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "a.example.com", "b.example.com"}, "at most one DRIVER"},
		{[]string{"status", "-o", "table"}, `-o "table"`},
		{[]string{"status", "--bogus"}, "--bogus"},
		{[]string{"status", "bad/name"}, `DRIVER "bad/name"`},
		{[]string{"status", "--proxy-timeout=0s"}, `--proxy-timeout "0s"`},
		{[]string{"status", "--proxy-concurrency=0"}, `--proxy-concurrency "0"`},
		{[]string{"status", "--kubeconfig", missing}, "kubeconfig"},
		{[]string{"nosuchcommand"}, "unknown command"},
		{[]string{"verify", "-f", "x", "--case", "1_deployed"}, `invalid --case "1_deployed": is not a case that can be chosen`},
		{[]string{"verify", "-f", "x", "--case", "6_rollout", "--rollouts", "0"}, `invalid --rollouts "0": must be at least 1`},
		{[]string{"verify", "-f", "x", "--registrar-logs", "maybe"}, `invalid --registrar-logs "maybe": must be keep or blocked`},
		{[]string{"verify"}, `invalid -f "": must be given`},
		{[]string{"verify", "-f", "x", "--registrar-image="}, `invalid --registrar-image "": must not be empty`},
		{[]string{"verify", "-f", "x", "--all-nodes", "--node", "n"}, `invalid --all-nodes "true": excludes --node`},
		{[]string{"verify", "-f", "x", "--expect", missing}, `invalid --expect "` + missing + `": cannot be read`},
		{[]string{"storage-e2e", "--build-only", "--kubernetes-version", "v1.37.2", "--e2e-binary", notE2E}, `invalid --e2e-binary "` + notE2E + `": gives the binary --build-only would build`},
		// storage-e2e: every input checked before a cluster is asked.
		{[]string{"storage-e2e"}, `invalid --definition "": must be given`},
		{[]string{"storage-e2e", "--definition", missing}, `invalid --definition "` + missing + `": cannot be read`},
		{[]string{"storage-e2e", "--definition", noName}, "DriverInfo.Name is empty"},
		{[]string{"storage-e2e", "--definition", reference, "--e2e-binary", notE2E}, `invalid --e2e-binary "` + notE2E + `": does not run as Kubernetes' e2e test binary`},
		{[]string{"storage-e2e", "--definition", reference, "--kubernetes-version", "v1.37.2"}, `invalid --kubernetes-version "v1.37.2": applies to a build only: a run is of the cluster's version; add --build-only`},
		{[]string{"storage-e2e", "--build-only", "--kubernetes-version", "1.37"}, `invalid --kubernetes-version "1.37": is not a Kubernetes release`},
		{[]string{"storage-e2e", "--definition", reference, "--focus", "a[", "--out", out}, `invalid --focus "a["`},
		{[]string{"storage-e2e", "--definition", reference, "--skip", "(", "--out", out}, `invalid --skip "("`},
		{[]string{"storage-e2e", "--definition", reference, "--timeout", "5s", "--out", out}, `invalid --timeout "5s"`},
		{[]string{"storage-e2e", "--definition", reference, "--repo-list", missing, "--out", out}, `invalid --repo-list`},
		{[]string{"storage-e2e", "--definition", reference, "--out", noName}, `invalid --out "` + noName + `": is a file`},
		{[]string{"storage-e2e", "--definition", reference, "--kubeconfig", missing, "--out", out}, "kubeconfig"},
		{[]string{"storage-e2e", "extra"}, "takes no arguments"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || strings.Contains(errOut.String(), "Options.") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %q, not a library field", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// TestEveryCommandBadValue lists the commands: for a bad value, each
// returns the one error of a bad value, a *csiplugin.ValidationError
// naming the flag or argument (as the user wrote it), the value, the rule
// and the fix, and exits 2. A command added without a case here fails.
func TestEveryCommandBadValue(t *testing.T) {
	bad := map[string][]string{
		"status":      {"status", "--proxy-concurrency=0"},
		"verify":      {"verify", "-f", "x", "--rollouts", "0"},
		"storage-e2e": {"storage-e2e", "--definition", "../../manifests/examples/storage-e2e/stub.csi.example.com.yaml", "--timeout", "5s", "--out", t.TempDir()},
	}
	var code int
	for _, c := range newRoot(&code, io.Discard, io.Discard).Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		args, ok := bad[c.Name()]
		if !ok {
			t.Errorf("command %s: no bad value listed here", c.Name())
			continue
		}
		delete(bad, c.Name())
		code, err := execute(context.Background(), args, io.Discard, io.Discard)
		var ve *csiplugin.ValidationError
		if !errors.As(err, &ve) || code != 2 || ve.Value == "" || ve.Rule == "" || ve.Fix == "" || !strings.HasPrefix(ve.What, "-") {
			t.Errorf("%q: exit %d, error %#v; want 2 and a *csiplugin.ValidationError naming the flag, the value, the rule and the fix", args, code, err)
		}
	}
	for name := range bad {
		t.Errorf("command %s is listed here but not a command", name)
	}
}
