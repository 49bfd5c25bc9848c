package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// The libraries name options (Options.HTTPEndpoint); the command line names
// the flag that sets it.
func TestErrorsNameFlags(t *testing.T) {
	clearPrefixedEnv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	res := runInProcess(t, defaultRoles(), "csi-registrar", "register", "--kubelet-registration-path=/k/csi.sock",
		"--csi-address="+filepath.Join(dir, "csi.sock"), "--plugin-registration-path="+dir, "--http-endpoint="+busy.Addr().String())
	lines := linesWith(res.stderr, "error: ")
	if res.code != exitError || len(lines) != 1 || !strings.Contains(lines[0], "--http-endpoint "+busy.Addr().String()) ||
		strings.Contains(lines[0], "Options.") {
		t.Fatalf("want exit code 1 and an error naming --http-endpoint and the address; %s", res)
	}
}
