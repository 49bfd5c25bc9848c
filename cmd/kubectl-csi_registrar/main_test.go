package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadArguments: every bad argument exits 2 with a message naming it,
// before any API call.
func TestBadArguments(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
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
		{[]string{"verify", "-f", "x", "--case", "1_deployed"}, `case "1_deployed"`},
		{[]string{"verify", "-f", "x", "--case", "6_rollout", "--rollouts", "0"}, "--rollouts=0"},
		{[]string{"verify", "-f", "x", "--registrar-logs", "maybe"}, "--registrar-logs=maybe"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) || strings.Contains(errOut.String(), "Options.") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %q, not a library field", tc.args, code, errOut.String(), tc.want)
		}
	}
}
