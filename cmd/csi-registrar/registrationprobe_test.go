package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/testwait"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// probeCommands are the command lines of an exec probe in the registrar's
// container: upstream's (its charts', the image's /csi-node-driver-registrar),
// and the same through the image's entrypoint.
func probeCommands(kubeletPath string) map[string][]string {
	args := []string{"--kubelet-registration-path=" + kubeletPath, "--mode=kubelet-registration-probe"}
	return map[string][]string{
		"upstream":   append([]string{upstreamAlias}, args...),
		"entrypoint": append([]string{binary, "register"}, args...),
	}
}

// execProbe runs argv as the kubelet runs an exec probe in the registrar's
// container: with its environment, so with the same
// CSI_REGISTRAR_STATE_FILE, stateFile.
func execProbe(tb testing.TB, stateFile string, argv []string) result {
	tb.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(childEnv(), envPrefix+"STATE_FILE="+stateFile)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, exited := err.(*exec.ExitError); !exited {
			tb.Fatalf("run %q: %v", argv, err)
		}
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// waitStateStage waits until the state file at path says stage, with a
// detail that contains each of details.
func waitStateStage(tb testing.TB, path, stage string, details ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var last []byte
	if err := testwait.Until(ctx, 5*time.Millisecond, func() bool {
		last, _ = os.ReadFile(path)
		var rec struct{ Stage, Detail string }
		return json.Unmarshal(last, &rec) == nil && rec.Stage == stage && containsAll(rec.Detail, details...)
	}); err != nil {
		tb.Fatalf("state file %s did not say %q with %q within %s; it holds %q", path, stage, details, waitTimeout, last)
	}
}

// TestExecRegistrationProbe: the exit code and message of upstream's exec
// probe line against a real registrar process at each stage, reached by a
// real registration flow (the reference driver, a kubelet-style client on
// the registration socket).
func TestExecRegistrationProbe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup brings a registrar to the case's state and returns its
		// state file.
		setup  func(t *testing.T) string
		code   int
		stdout []string
		stderr []string
	}{
		{
			name:  "no file",
			setup: func(t *testing.T) string { return filepath.Join(t.TempDir(), "registrar.state") },
			code:  exitError, stderr: []string{"error: no registrar is running in this container: no state file "},
		},
		{
			name: "stale pid",
			setup: func(t *testing.T) string {
				reg := startRegistered(t)
				reg.signal(t, syscall.SIGKILL)
				reg.wait(t)
				return reg.stateFile
			},
			code: exitError, stderr: []string{"error: no registrar is running in this container: its writer, pid ", " has exited; its state file ",
				" says: registered for "},
		},
		{
			name: "waiting for driver",
			setup: func(t *testing.T) string {
				dir := shortTempDir(t)
				reg := filepath.Join(dir, "reg")
				if err := os.Mkdir(reg, 0o755); err != nil {
					t.Fatal(err)
				}
				sock := filepath.Join(dir, "absent.sock")
				p := startProc(t, binary, "register", "--csi-address="+sock, "--kubelet-registration-path="+sock, "--plugin-registration-path="+reg)
				waitStateStage(t, p.stateFile, "waiting for driver")
				return p.stateFile
			},
			code: exitError, stderr: []string{"error: not registered: waiting for driver for ", "(pid "},
		},
		{
			name: "awaiting kubelet",
			setup: func(t *testing.T) string {
				f := newFixture(t)
				reg := f.startRegistrar(t)
				waitStateStage(t, reg.stateFile, "waiting for kubelet")
				return reg.stateFile
			},
			code: exitError, stderr: []string{"error: not registered: waiting for kubelet for ", "(driver " + testDriver + ", pid "},
		},
		{
			name: "rejected",
			setup: func(t *testing.T) string {
				f := newFixture(t)
				reg := f.startRegistrar(t)
				waitStateStage(t, reg.stateFile, "waiting for kubelet")
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				// A kubelet from 1.36 on retries on the same socket: the
				// registrar keeps it, and its stage, for minutes (without
				// the retry the socket is re-created after 3 s, and the
				// stage with it).
				const reason = "driver name not unique on this node"
				if err := registrartest.Reject(ctx, f.regSock, reason); err != nil {
					t.Fatal(err)
				}
				waitStateStage(t, reg.stateFile, "kubelet rejected")
				if err := registrartest.Reject(ctx, f.regSock, reason); err != nil {
					t.Fatal(err)
				}
				waitStateStage(t, reg.stateFile, "kubelet rejected", "the kubelet retries by itself; socket kept")
				return reg.stateFile
			},
			code: exitError, stderr: []string{"error: not registered: kubelet rejected for ", "driver name not unique on this node (the kubelet retries by itself; socket kept)", "(driver " + testDriver + ", pid "},
		},
		{
			name: "confirmed",
			setup: func(t *testing.T) string {
				reg := startRegistered(t)
				return reg.stateFile
			},
			stdout: []string{"registered for ", "(driver " + testDriver + ", pid "},
		},
		{
			name: "stopped",
			setup: func(t *testing.T) string {
				reg := startRegistered(t)
				reg.signal(t, syscall.SIGTERM)
				if code := reg.wait(t); code != 0 {
					t.Fatalf("registrar exited %d on SIGTERM", code)
				}
				return reg.stateFile
			},
			code: exitError, stderr: []string{"error: no registrar is running in this container: no state file "},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stateFile := tc.setup(t)
			for form, argv := range probeCommands("/var/lib/kubelet/plugins/" + testDriver + "/csi.sock") {
				res := execProbe(t, stateFile, argv)
				if res.code != tc.code || !containsAll(res.stdout, tc.stdout...) || !containsAll(res.stderr, tc.stderr...) {
					t.Errorf("%s: want exit %d, stdout with %q, stderr with %q; %s", form, tc.code, tc.stdout, tc.stderr, res)
				}
				if tc.code == 0 && res.stderr != "" || tc.code != 0 && (res.stdout != "" || strings.Count(res.stderr, "\n") != 1) {
					t.Errorf("%s: want one line, on stdout if it passes, else on stderr; %s", form, res)
				}
				t.Logf("%s: exit %d: %s", form, res.code, strings.TrimSpace(res.stdout+res.stderr))
			}
		})
	}
}

// shortTempDir is a temporary directory with a path short enough for unix
// sockets.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "crp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// BenchmarkExecRegistrationProbe measures the exec probe from exec to exit
// (upstream's command line, through the /csi-node-driver-registrar name)
// against a running registrar the kubelet-style client registered, so the
// probe passes:
//
//	go test -run '^$' -bench ExecRegistrationProbe -benchtime 200x ./cmd/csi-registrar
func BenchmarkExecRegistrationProbe(b *testing.B) {
	dir, err := os.MkdirTemp("", "crb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock, reg, state := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "reg"), filepath.Join(dir, "registrar.state")
	if err := os.Mkdir(reg, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, argv := range [][]string{
		{"driver", "--endpoint=unix://" + sock, "--driver-name=" + testDriver, "--node-id=" + testNodeID},
		{"register", "--csi-address=" + sock, "--kubelet-registration-path=" + sock, "--plugin-registration-path=" + reg},
	} {
		cmd := exec.Command(binary, argv...)
		cmd.Env = append(childEnv(), envPrefix+"STATE_FILE="+state)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	regSock := filepath.Join(reg, testDriver+"-reg.sock")
	waitStateStage(b, state, "waiting for kubelet") // the socket listens
	if r, err := registrartest.Register(ctx, regSock); err != nil || r.Err != nil {
		b.Fatal(err, r)
	}
	waitStateStage(b, state, "registered")
	// The probe, and for scale the same binary printing its version: the
	// cost of exec and start alone.
	for name, argv := range map[string][]string{
		"probe":   probeCommands(sock)["upstream"],
		"version": {binary, "--version"},
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if res := execProbe(b, state, argv); res.code != 0 {
					b.Fatalf("%q failed: %s", argv, res)
				}
			}
		})
	}
}

// startRegistered starts a registrar for a new fixture and returns it once
// the kubelet has registered it, as its state file says.
func startRegistered(t *testing.T) *proc {
	t.Helper()
	f := newFixture(t)
	reg := f.startRegistrar(t)
	// Published once the socket listens (its file appears before, at bind).
	waitStateStage(t, reg.stateFile, "waiting for kubelet")
	f.kubeletRegister(t)
	waitStateStage(t, reg.stateFile, "registered")
	return reg
}
