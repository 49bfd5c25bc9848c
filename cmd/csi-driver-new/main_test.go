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

	"github.com/csi-registrar/csi-registrar/internal/newdriver"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
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

// TestBadValueErrorType: the generator, a command of one, returns for a
// bad value the one error of a bad value, a *csiplugin.ValidationError (the
// value, the rule, the fix), and exits 2.
func TestBadValueErrorType(t *testing.T) {
	o := newdriver.Options{Module: "example.com/mydriver", Driver: "bad_name", Dir: filepath.Join(t.TempDir(), "new")}
	code, err := generate(context.Background(), o, "../..", false, io.Discard)
	var ve *csiplugin.ValidationError
	if !errors.As(err, &ve) || code != 2 || ve.Value != "bad_name" || ve.Rule == "" || ve.Fix == "" {
		t.Errorf("exit %d, error %#v; want 2 and a *csiplugin.ValidationError of the driver name", code, err)
	}
}
