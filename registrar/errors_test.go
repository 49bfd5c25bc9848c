package registrar_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// percentPath is a path a format would garble: verbs, an indexed verb and
// an escaped percent sign.
const percentPath = "/run/100%s%[1]s%v%%/csi.sock"

// TestOptionErrorMessages: an *OptionError's message is assembled from its
// fields in one place, with the option called by its field or by the name
// given to Describe, and values shown verbatim.
func TestOptionErrorMessages(t *testing.T) {
	enoent := errors.New("no such file or directory")
	for _, c := range []struct {
		err       *registrar.OptionError
		want      string // Error()
		described string // Describe("--flag")
	}{
		{&registrar.OptionError{Option: registrar.OptionHTTPEndpoint, Value: "127.0.0.1:9809", Op: "listen on",
			Err: errors.New("address already in use"), Fix: "use a free port"},
			"listen on Options.HTTPEndpoint 127.0.0.1:9809: address already in use; use a free port",
			"listen on --flag 127.0.0.1:9809: address already in use; use a free port"},
		{&registrar.OptionError{Option: registrar.OptionCSIAddress, Value: percentPath, Op: "watch the directory of",
			Path: filepath.Dir(percentPath), Err: enoent, Fix: "check the volume mount of that directory"},
			"watch the directory of Options.CSIAddress " + percentPath + " (" + filepath.Dir(percentPath) + "): no such file or directory; check the volume mount of that directory",
			"watch the directory of --flag " + percentPath + " (" + filepath.Dir(percentPath) + "): no such file or directory; check the volume mount of that directory"},
		{&registrar.OptionError{Option: registrar.OptionConnectionTimeout, Value: "1s",
			Err: &registrar.DriverTimeoutError{Address: percentPath, Waited: time.Second, Err: enoent}, Fix: "allow a longer wait"},
			"the CSI driver at " + percentPath + " did not answer within Options.ConnectionTimeout=1s (waited 1s): no such file or directory; allow a longer wait",
			"the CSI driver at " + percentPath + " did not answer within --flag=1s (waited 1s): no such file or directory; allow a longer wait"},
		{&registrar.OptionError{Option: registrar.OptionKubeletRegistrationPath, Value: "rel%d",
			Err: &csiplugin.ValidationError{What: "Options.KubeletRegistrationPath", Value: "rel%d", Rule: "must be an absolute path", Fix: "fix it"}},
			`invalid Options.KubeletRegistrationPath "rel%d": must be an absolute path; fix it`,
			`invalid --flag "rel%d": must be an absolute path; fix it`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q\nwant       %q", got, c.want)
		}
		if got := c.err.Describe("--flag"); got != c.described {
			t.Errorf("Describe = %q\nwant       %q", got, c.described)
		}
	}
}

// TestRunErrorKeepsPercentPath: a CSIAddress holding '%' is in Run's error
// as it is, in the message and in the error's Value.
func TestRunErrorKeepsPercentPath(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(filepath.Dir(e.driverSock), "100%s%[1]s%v%%")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "csi.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runUntilError(t, e, path)
	var oe *registrar.OptionError
	if !errors.As(err, &oe) || oe.Option != registrar.OptionCSIAddress || oe.Value != path {
		t.Fatalf("Run = %#v, want an *OptionError of CSIAddress with the value %q", err, path)
	}
	for _, msg := range []string{err.Error(), oe.Describe("--csi-address")} {
		if !strings.Contains(msg, " "+path+": ") || strings.Contains(msg, "%!") || !strings.Contains(msg, "not a socket") {
			t.Errorf("message %q, want the path %q verbatim and the rule", msg, path)
		}
	}
	if errors.Is(err, syscall.ENOENT) {
		t.Errorf("Run = %v, want no system error as the cause", err)
	}
}

// TestInstanceStateError: FetchInstanceState on a socket nobody listens on
// (a dead instance) fails with an *InstanceStateError naming the socket,
// whose cause is the refused connection.
func TestInstanceStateError(t *testing.T) {
	dir, err := os.MkdirTemp("", "ise")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, csiplugin.RollingUpdateSocketName("x.example.com", csiplugin.InstanceID("pod"), 3))
	registrartest.StaleSocket(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = registrar.FetchInstanceState(ctx, path)
	var ise *registrar.InstanceStateError
	if !errors.As(err, &ise) || ise.Path != path || !strings.HasPrefix(err.Error(), "no instance state from "+path+": ") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("got %T %v", err, err)
	}
}
