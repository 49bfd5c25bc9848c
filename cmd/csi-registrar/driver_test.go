package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// TestDriverVolumeAndRegistrationFlags checks how --state-dir and the
// in-process registration flags become stubdriver.Options.
func TestDriverVolumeAndRegistrationFlags(t *testing.T) {
	clearPrefixedEnv(t)
	const kp = "/var/lib/kubelet/plugins/stub.csi.example.com/csi.sock"
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		wantState string
		wantReg   *registrar.Options
	}{
		{name: "defaults: no volumes, no registration", args: nil},
		{name: "state dir", args: []string{"--state-dir=/var/lib/csi-registrar/stub"}, wantState: "/var/lib/csi-registrar/stub"},
		{name: "register with defaults", args: []string{"--register", "--kubelet-registration-path=" + kp},
			wantReg: &registrar.Options{KubeletRegistrationPath: kp, PluginRegistrationPath: "/registration",
				KubeletWait: registrar.DefaultKubeletWait, RegistrationRetryMax: registrar.DefaultRegistrationRetryMax, Version: version}},
		{name: "register with an unclean path", args: []string{"--register", "--kubelet-registration-path=/var/lib/kubelet//plugins/stub/csi.sock/"},
			wantReg: &registrar.Options{KubeletRegistrationPath: "/var/lib/kubelet/plugins/stub/csi.sock", PluginRegistrationPath: "/registration",
				KubeletWait: registrar.DefaultKubeletWait, RegistrationRetryMax: registrar.DefaultRegistrationRetryMax, Version: version}},
		{name: "register with everything", args: []string{"--register", "--kubelet-registration-path=" + kp,
			"--plugin-registration-path=/reg", "--kubelet-wait=1m", "--registration-retry-max=3m",
			"--http-endpoint=:9809", "--enable-pprof", "--state-dir=/state"},
			wantState: "/state",
			wantReg: &registrar.Options{KubeletRegistrationPath: kp, PluginRegistrationPath: "/reg",
				KubeletWait: time.Minute, RegistrationRetryMax: 3 * time.Minute, HTTPEndpoint: ":9809", EnablePprof: true, Version: version}},
		{name: "from the environment", env: map[string]string{
			"CSI_REGISTRAR_REGISTER":                  "true",
			"CSI_REGISTRAR_KUBELET_REGISTRATION_PATH": kp,
			"CSI_REGISTRAR_HTTP_ENDPOINT":             ":9810",
			"CSI_REGISTRAR_STATE_DIR":                 "/env-state",
		}, wantState: "/env-state",
			wantReg: &registrar.Options{KubeletRegistrationPath: kp, PluginRegistrationPath: "/registration",
				KubeletWait: registrar.DefaultKubeletWait, RegistrationRetryMax: registrar.DefaultRegistrationRetryMax, HTTPEndpoint: ":9810", Version: version}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearPrefixedEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var c capture
			res := runInProcess(t, c.roles(), append([]string{"csi-registrar", "driver", "--node-id=n1"}, tc.args...)...)
			if res.code != 0 || c.driverCalls != 1 {
				t.Fatalf("want exit 0 and one driver call; %s", res)
			}
			got := c.driver[0]
			if got.StateDir != tc.wantState {
				t.Errorf("StateDir = %q, want %q", got.StateDir, tc.wantState)
			}
			if !reflect.DeepEqual(got.Register, tc.wantReg) {
				t.Errorf("Register:\n got %+v\nwant %+v", got.Register, tc.wantReg)
			}
		})
	}
}

func TestBadDriverRegistrationInput(t *testing.T) {
	base := func(dir string) []string {
		return []string{"--endpoint=unix://" + filepath.Join(dir, "csi.sock"), "--node-id=node-1"}
	}
	const kp = "--kubelet-registration-path=/var/lib/kubelet/plugins/stub.csi.example.com/csi.sock"
	checkBadInput(t, "driver", base, []badInput{
		{name: "kubelet-registration-path without --register", args: []string{kp},
			want: []string{"--kubelet-registration-path", "has no effect without --register"}},
		{name: "http-endpoint without --register", args: []string{"--http-endpoint=:9809"},
			want: []string{"--http-endpoint", `":9809"`, "has no effect without --register"}},
		{name: "register without kubelet-registration-path", args: []string{"--register"},
			want: []string{"--kubelet-registration-path", "is required"}},
		{name: "register with a relative kubelet-registration-path", args: []string{"--register", "--kubelet-registration-path=csi.sock"},
			want: []string{`"csi.sock"`}},
		{name: "register with an empty plugin-registration-path", args: []string{"--register", kp, "--plugin-registration-path="},
			want: []string{"--plugin-registration-path", "must not be empty"}},
		{name: "register with a negative kubelet-wait", args: []string{"--register", kp, "--kubelet-wait=-1s"},
			want: []string{"--kubelet-wait", `"-1s"`, "must not be negative"}},
		{name: "relative state-dir", args: []string{"--state-dir=state"},
			want: []string{"--state-dir", `"state"`, "must be an absolute path"}},
	})
}

// TestDriverRoutesKlog: what k8s.io/mount-utils logs through klog comes out
// of the driver command's slog logger, in its format, and klog's verbosity
// follows -v.
func TestDriverRoutesKlog(t *testing.T) {
	clearPrefixedEnv(t)
	logFromKlog := roles{driver: func(context.Context, stubdriver.Options) error {
		klog.InfoS("klog info line", "path", "/var/lib/kubelet/pods/x")
		klog.V(4).Infof("klog verbose line %d", 4)
		klog.Warningf("klog warning line")
		return nil
	}}
	for _, tc := range []struct {
		v           string
		wantVerbose bool
	}{{"0", false}, {"4", true}} {
		res := runInProcess(t, logFromKlog, "csi-registrar", "driver", "--node-id=n1", "--logging-format=json", "-v="+tc.v)
		if res.code != 0 {
			t.Fatalf("-v=%s: %s", tc.v, res)
		}
		lines := map[string]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("-v=%s: a line that is not JSON (klog's own format?): %q", tc.v, line)
			}
			if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "klog ") {
				lines[msg] = rec
			}
		}
		if rec := lines["klog info line"]; rec == nil || rec["v"] != float64(0) || rec["level"] != nil || rec["path"] != "/var/lib/kubelet/pods/x" || rec["logger"] != "klog" {
			t.Errorf("-v=%s: klog.InfoS came out as %v; stderr:\n%s", tc.v, rec, res.stderr)
		}
		if rec := lines["klog warning line"]; rec == nil {
			t.Errorf("-v=%s: klog.Warningf is missing; stderr:\n%s", tc.v, res.stderr)
		}
		if _, got := lines["klog verbose line 4"]; got != tc.wantVerbose {
			t.Errorf("-v=%s: klog.V(4) line logged = %v, want %v; stderr:\n%s", tc.v, got, tc.wantVerbose, res.stderr)
		}
	}
}

// TestExecDriverRegistersItself: `driver --register` registers with the
// kubelet (registrartest acting as it) without a registrar sidecar, and on
// SIGTERM removes its registration socket, then its CSI socket, and exits 0.
func TestExecDriverRegistersItself(t *testing.T) {
	dir, err := os.MkdirTemp("", "cr") // short: a socket path holds 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock, regDir := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "reg")
	regSock := filepath.Join(regDir, testDriver+"-reg.sock")
	if err := os.Mkdir(regDir, 0o750); err != nil {
		t.Fatal(err)
	}
	d := startProc(t, binary, "driver", "--endpoint=unix://"+sock, "--driver-name="+testDriver, "--node-id="+testNodeID,
		"--register", "--kubelet-registration-path="+sock, "--plugin-registration-path="+regDir, "-v=2")
	// Listening, not only there (the file appears at bind, before listen):
	// logged once the socket is served.
	d.waitLog(t, 1, "registration socket created", "outcome=serving")

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	reg, err := registrartest.Register(ctx, regSock)
	if err != nil || reg.Err != nil {
		t.Fatalf("kubelet registration: %v, %v", err, reg)
	}
	if reg.Info.Name != testDriver || reg.Info.Endpoint != sock || reg.NodeInfo.GetNodeId() != testNodeID {
		t.Errorf("registered %q at %q with node %q", reg.Info.Name, reg.Info.Endpoint, reg.NodeInfo.GetNodeId())
	}
	d.waitLog(t, 1, "kubelet confirmed the registration", "driver="+testDriver, "outcome=registered")

	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t); code != 0 {
		t.Errorf("exit code after SIGTERM: %d, want 0", code)
	}
	assertGone(t, regSock)
	assertGone(t, sock)
	log := d.stderr.String()
	if removed, stopped := strings.Index(log, "registration socket removed"), strings.Index(log, "CSI driver stopped"); removed < 0 || stopped < removed {
		t.Errorf("want the registration socket removed before the CSI socket:\n%s", log)
	}
}
