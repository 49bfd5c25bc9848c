package stubdriver_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// logBuffer collects log lines from concurrent goroutines; tests wait on its writes.
type logBuffer struct{ registrartest.Buffer }

// index returns the position of the first line containing msg, or -1.
func (b *logBuffer) index(msg string) int { return strings.Index(b.String(), msg) }

// waitLog waits until a line containing msg is logged, or fails the test
// after 10 s.
func (b *logBuffer) waitLog(t *testing.T, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Wait(ctx, func(s string) bool { return strings.Contains(s, msg) }); err != nil {
		t.Fatalf("no %q in the log: %v\n%s", msg, err, b.String())
	}
}

// TestInProcessRegistration: with Options.Register the driver registers
// itself as the sidecar would: the kubelet (here registrartest, which acts
// as the kubelet does) finds <name>-reg.sock, is sent to the driver's own
// socket, and gets NodeGetInfo's answer. On the way out the registration
// socket goes first, then the CSI socket.
func TestInProcessRegistration(t *testing.T) {
	dir := socketDir(t)
	registry := filepath.Join(dir, "registry")
	if err := os.Mkdir(registry, 0o750); err != nil {
		t.Fatal(err)
	}
	csiSock := filepath.Join(dir, "csi.sock")
	var logs logBuffer
	d := startDriver(t, stubdriver.Options{
		Endpoint: "unix://" + csiSock,
		NodeID:   "node-7",
		Register: &registrar.Options{
			KubeletRegistrationPath: "/var/lib/kubelet/plugins/" + stubdriver.DefaultName + "/csi.sock",
			PluginRegistrationPath:  registry,
		},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	regSock := filepath.Join(registry, stubdriver.DefaultName+"-reg.sock")
	// Not the file's appearance: bind(2) creates it an instant before
	// listen(2), and a dial in between is refused. The registrar logs this
	// once the socket listens and its server runs.
	logs.waitLog(t, "registration socket created")
	if _, err := os.Lstat(regSock); err != nil {
		t.Fatalf("the registrar serves, but not at %s: %v", regSock, err)
	}

	// registrartest dials the endpoint GetInfo announces; here that is a host
	// path that does not exist, so check GetInfo, then NodeGetInfo on the
	// socket the driver really serves, then Notify: the kubelet's sequence.
	ctx := context.Background()
	info, err := registrartest.GetInfoSocket(ctx, regSock)
	if err != nil {
		t.Fatal(err)
	}
	if err := registrartest.CheckInfo(info); err != nil {
		t.Fatalf("the kubelet would reject GetInfo %v: %v", info, err)
	}
	if info.Name != stubdriver.DefaultName || info.Endpoint != "/var/lib/kubelet/plugins/"+stubdriver.DefaultName+"/csi.sock" {
		t.Errorf("GetInfo = name %q endpoint %q", info.Name, info.Endpoint)
	}
	ni, err := registrartest.NodeGetInfo(ctx, csiSock)
	if err != nil || ni.GetNodeId() != "node-7" {
		t.Fatalf("NodeGetInfo = %v, %v", ni, err)
	}
	if err := registrartest.NotifySocket(ctx, regSock, true, ""); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, "kubelet confirmed the registration")

	// The CSI socket listened before the registrar started.
	serving, started := logs.index("CSI driver serving"), logs.index("in-process registration started")
	if serving < 0 || started < serving {
		t.Errorf("the registrar started before the CSI socket served:\n%s", logs.String())
	}

	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, p := range []string{regSock, csiSock} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after Run returned: %v", p, err)
		}
	}
	removed, stopped := logs.index("registration socket removed"), logs.index("CSI driver stopped")
	if removed < 0 || stopped < removed {
		t.Errorf("the CSI socket went before the registration socket:\n%s", logs.String())
	}
}

// TestInProcessRegistrationFailure: when the registrar cannot run (here: its
// registry directory does not exist), Run stops serving, removes the CSI
// socket and returns the registrar's error.
func TestInProcessRegistrationFailure(t *testing.T) {
	dir := socketDir(t)
	csiSock := filepath.Join(dir, "csi.sock")
	d, err := stubdriver.New(stubdriver.Options{
		Endpoint: csiSock, NodeID: "node-1", Logger: quietLogger(),
		Register: &registrar.Options{
			KubeletRegistrationPath: "/var/lib/kubelet/plugins/x/csi.sock",
			PluginRegistrationPath:  filepath.Join(dir, "missing"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the registrar failed")
	}
	if err == nil || !strings.Contains(err.Error(), "in-process registration") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Run = %v, want the registrar's error naming the missing directory", err)
	}
	if _, err := os.Lstat(csiSock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CSI socket left behind: %v", err)
	}
}

// TestInProcessRegistrationOptions: New checks the registration options as
// the registrar does, and refuses a socket or a name other than the driver's.
func TestInProcessRegistrationOptions(t *testing.T) {
	valid := func() stubdriver.Options {
		return stubdriver.Options{Endpoint: "unix:///tmp/sd/csi.sock", NodeID: "node-1", Logger: quietLogger(),
			Register: &registrar.Options{KubeletRegistrationPath: "/var/lib/kubelet/plugins/x/csi.sock"}}
	}
	for _, tc := range []struct {
		name   string
		modify func(*registrar.Options)
		value  string // the value the error must quote; "" means New must succeed
	}{
		{name: "minimal", modify: func(*registrar.Options) {}},
		{name: "own endpoint as CSIAddress", modify: func(o *registrar.Options) { o.CSIAddress = "/tmp/sd/csi.sock" }},
		{name: "own name as DriverName", modify: func(o *registrar.Options) { o.DriverName = stubdriver.DefaultName }},
		{name: "another CSIAddress", modify: func(o *registrar.Options) { o.CSIAddress = "/csi/other.sock" }, value: "/csi/other.sock"},
		{name: "another DriverName", modify: func(o *registrar.Options) { o.DriverName = "other.example.com" }, value: "other.example.com"},
		{name: "no KubeletRegistrationPath", modify: func(o *registrar.Options) { o.KubeletRegistrationPath = "" }, value: ""},
		{name: "relative KubeletRegistrationPath", modify: func(o *registrar.Options) { o.KubeletRegistrationPath = "csi.sock" }, value: "csi.sock"},
		{name: "negative KubeletWait", modify: func(o *registrar.Options) { o.KubeletWait = -time.Second }, value: "-1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := valid()
			tc.modify(opts.Register)
			wantErr := tc.name != "minimal" && !strings.HasPrefix(tc.name, "own ")
			d, err := stubdriver.New(opts)
			if !wantErr {
				if err != nil || d == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if d != nil {
				t.Error("New returned a driver with its error")
			}
			if ve := asValidationError(t, err); ve.Value != tc.value {
				t.Errorf("ValidationError.Value = %q, want %q (%v)", ve.Value, tc.value, err)
			}
		})
	}
}
