package e2ebinary

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

func noLog() logr.Logger { return logr.Discard() }

// TestBinaryVersion: a file that does not run, exits non-zero or prints no
// version is not an e2e test binary.
func TestBinaryVersion(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeExec(t, good, "#!/bin/sh\n[ \"$1\" = --version ] && echo v1.37.2\n")
	if v, err := BinaryVersion(context.Background(), good); err != nil || v != "v1.37.2" {
		t.Errorf("BinaryVersion = %q, %v", v, err)
	}
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho v1.37.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails := filepath.Join(dir, "fails")
	writeExec(t, fails, "#!/bin/sh\necho 'flag provided but not defined: -version' >&2\nexit 2\n")
	chatty := filepath.Join(dir, "chatty")
	writeExec(t, chatty, "#!/bin/sh\necho hello world\n")
	for _, p := range []string{notExec, fails, chatty, filepath.Join(dir, "absent"), dir} {
		var be *BinaryError
		if v, err := BinaryVersion(context.Background(), p); !errors.As(err, &be) || be.Path != p {
			t.Errorf("BinaryVersion(%s) = %q, %v; want a *BinaryError", filepath.Base(p), v, err)
		}
	}
	_, err := BinaryVersion(context.Background(), fails)
	if err == nil || !strings.Contains(err.Error(), "flag provided but not defined") {
		t.Errorf("the error does not show what the binary printed: %v", err)
	}
}

// TestBinaryVersionReal asks a real e2e test binary, when the cache holds
// one (make e2e-storage or kubectl csi-registrar storage-e2e built it).
func TestBinaryVersionReal(t *testing.T) {
	cache, err := DefaultCacheDir()
	if err != nil {
		t.Skip(err)
	}
	bins, _ := filepath.Glob(filepath.Join(cache, "v*", "e2e.test"))
	if len(bins) == 0 {
		t.Skipf("no e2e test binary under %s", cache)
	}
	for _, b := range bins {
		v, err := BinaryVersion(context.Background(), b)
		if want := filepath.Base(filepath.Dir(b)); err != nil || v != want {
			t.Errorf("%s --version: %q, %v; want %s", b, v, err, want)
		}
	}
}
