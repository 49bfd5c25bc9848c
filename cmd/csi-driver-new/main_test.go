package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input exits 2, says why and that nothing was written, and writes nothing.
func TestBadInputExit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-from", "../..", "-module", "example.com/mydriver",
		"-driver", "bad_name", "-dir", dir}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `"bad_name"`) || !strings.Contains(stderr.String(), "nothing was written") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s was created: %v", dir, err)
	}
}

func TestNotACheckout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-from", t.TempDir(), "-module", "example.com/mydriver",
		"-driver", "my.csi.example.com", "-dir", filepath.Join(t.TempDir(), "new")}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "not a checkout of github.com/csi-registrar/csi-registrar") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
}
