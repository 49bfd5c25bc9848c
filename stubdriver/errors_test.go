package stubdriver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// TestStateDirErrorKeepsPercentPath: a state directory that cannot be
// created is an *OptionError of OptionStateDir whose message holds the
// path as it is, '%' included.
func TestStateDirErrorKeepsPercentPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "100%s%[1]s%v%%")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(file, "state") // below a regular file: mkdir fails
	d, err := stubdriver.New(stubdriver.Options{Endpoint: filepath.Join(socketDir(t), "csi.sock"), NodeID: "node-1",
		StateDir: state, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(context.Background())
	var oe *registrar.OptionError
	if !errors.As(err, &oe) || oe.Option != stubdriver.OptionStateDir || oe.Value != state {
		t.Fatalf("Run = %#v, want an *OptionError of StateDir with the value %q", err, state)
	}
	for _, msg := range []string{err.Error(), oe.Describe("--state-dir")} {
		if !strings.Contains(msg, " "+state+": ") || strings.Contains(msg, "%!") {
			t.Errorf("message %q, want the path %q verbatim", msg, state)
		}
	}
}
