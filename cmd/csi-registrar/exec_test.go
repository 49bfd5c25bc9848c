package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// These tests run the built binary (see TestMain) as separate processes, on
// unix sockets in a short temporary directory, and act as the kubelet with
// registrartest.

const (
	testDriver   = "test.csi.example.com"
	testNodeID   = "node-1"
	testMaxVols  = 7
	testTopoKey  = "topology.test.csi.example.com/zone"
	testTopoZone = "zone-a"
)

// proc is a started csi-registrar process.
type proc struct {
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{} // closed when the process has exited
	state  *os.ProcessState
	// stateFile is CSI_REGISTRAR_STATE_FILE in its environment, in a
	// directory of its own: registrars of parallel tests (and of other
	// programs on this machine) do not share the default file.
	stateFile string
}

// startProc starts bin with args. The process is killed at the end of the
// test if it is still running, and its output is logged if the test failed.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{}), stateFile: filepath.Join(t.TempDir(), "registrar.state")}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = append(childEnv(), envPrefix+"STATE_FILE="+p.stateFile)
	p.start(t)
	p.killAtEnd(t, filepath.Base(bin), args)
	return p
}

// start starts p.cmd and a goroutine that waits for it, records its
// state and closes p.done.
func (p *proc) start(t *testing.T) {
	t.Helper()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
}

// killAtEnd kills p at the end of the test if it is still running and, if
// the test failed, logs its command line (name and args) and its output.
func (p *proc) killAtEnd(t *testing.T, name string, args []string) {
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), p.stdout.String(), p.stderr.String())
		}
	})
}

// childEnv is the test's environment without variables the commands read.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, envPrefix) || strings.HasPrefix(kv, "KUBE_NODE_NAME=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit code (-1 if a
// signal killed it).
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(waitTimeout):
		t.Fatalf("the process did not exit within %s", waitTimeout)
		return 0
	}
}

// waitLog waits until n log lines contain all of subs and returns them.
func (p *proc) waitLog(t *testing.T, n int, subs ...string) []string {
	t.Helper()
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := p.stderr.Wait(ctx, func(s string) bool {
		lines = linesWith(s, subs...)
		return len(lines) >= n
	}); err != nil {
		t.Fatalf("timed out after %s waiting for %d log lines containing %s", waitTimeout, n, strings.Join(subs, ", "))
	}
	return lines
}

// runProc runs bin to completion and returns its exit code, stdout and stderr.
func runProc(t *testing.T, bin string, args ...string) result {
	t.Helper()
	p := startProc(t, bin, args...)
	code := p.wait(t)
	return result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}

// fixture is a directory with a running reference driver and a registration
// directory, as a node would have them.
type fixture struct {
	dir        string // short: unix socket paths hold at most 107 bytes
	driverSock string // the driver's socket, also the "host path" the kubelet dials
	regDir     string // stands in for /var/lib/kubelet/plugins_registry
	regSock    string // where the registrar must create its socket
	driver     *proc
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "cr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fixture{
		dir:        dir,
		driverSock: filepath.Join(dir, "csi.sock"),
		regDir:     filepath.Join(dir, "reg"),
	}
	f.regSock = filepath.Join(f.regDir, testDriver+"-reg.sock")
	if err := os.Mkdir(f.regDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.driver = startProc(t, binary, "driver", "--endpoint=unix://"+f.driverSock, "--driver-name="+testDriver,
		"--node-id="+testNodeID, "--max-volumes-per-node="+strconv.Itoa(testMaxVols), "--topology="+testTopoKey+"="+testTopoZone)
	waitPath(t, f.driverSock)
	f.driver.waitLog(t, 1, "CSI driver serving", "driver="+testDriver, "socket="+f.driverSock, "outcome=serving")
	return f
}

// registerArgs are the register flags for this fixture.
func (f *fixture) registerArgs(extra ...string) []string {
	return append([]string{"--csi-address=" + f.driverSock, "--kubelet-registration-path=" + f.driverSock,
		"--plugin-registration-path=" + f.regDir, "-v=5"}, extra...)
}

func (f *fixture) startRegistrar(t *testing.T, extra ...string) *proc {
	t.Helper()
	return startProc(t, binary, append([]string{"register"}, f.registerArgs(extra...)...)...)
}

func isSocket(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode().Type() == fs.ModeSocket
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

func assertGone(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s should be gone, Lstat: %v", p, err)
	}
}

// kubeletRegister registers like the kubelet and checks everything the
// kubelet would write to the Node and CSINode.
func (f *fixture) kubeletRegister(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	reg, err := registrartest.Register(ctx, f.regSock)
	if err != nil {
		t.Fatalf("kubelet registration: %v", err)
	}
	if reg.Err != nil {
		t.Fatalf("the kubelet would reject the registration: %v", reg.Err)
	}
	info := reg.Info
	if info.Type != registerapi.CSIPlugin {
		t.Errorf("GetInfo type %q, want %q", info.Type, registerapi.CSIPlugin)
	}
	if info.Name != testDriver {
		t.Errorf("GetInfo name %q, want %q", info.Name, testDriver)
	}
	if info.Endpoint != f.driverSock {
		t.Errorf("GetInfo endpoint %q, want --kubelet-registration-path %q", info.Endpoint, f.driverSock)
	}
	has1x := false
	for _, v := range info.SupportedVersions {
		has1x = has1x || strings.HasPrefix(strings.TrimPrefix(v, "v"), "1.")
	}
	if !has1x {
		t.Errorf("GetInfo versions %q lack a 1.x version", info.SupportedVersions)
	}
	ni := reg.NodeInfo
	if ni.GetNodeId() != testNodeID || ni.GetMaxVolumesPerNode() != testMaxVols {
		t.Errorf("NodeGetInfo: node ID %q, max volumes %d; want %q, %d", ni.GetNodeId(), ni.GetMaxVolumesPerNode(), testNodeID, testMaxVols)
	}
	if want := map[string]string{testTopoKey: testTopoZone}; !reflect.DeepEqual(ni.GetAccessibleTopology().GetSegments(), want) {
		t.Errorf("NodeGetInfo topology %v, want %v", ni.GetAccessibleTopology().GetSegments(), want)
	}
}

// TestExecRegisterAndSignals: a registrar registers the driver with a
// kubelet, and each stop signal makes it exit 0 and remove its socket.
func TestExecRegisterAndSignals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig os.Signal
		bin string
	}{
		{syscall.SIGTERM, "csi-registrar"},
		{syscall.SIGINT, upstreamName},
		{syscall.SIGHUP, "csi-registrar"},
	} {
		t.Run(tc.sig.String()+"/"+tc.bin, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			var r *proc
			if tc.bin == upstreamName {
				r = startProc(t, upstreamAlias, f.registerArgs()...)
			} else {
				r = f.startRegistrar(t)
			}
			created := r.waitLog(t, 1, "registration socket created", "driver="+testDriver, "socket="+f.regSock, "outcome=serving")
			if !isSocket(f.regSock) {
				t.Fatalf("log says %q but %s is not a socket", created[0], f.regSock)
			}
			st, err := os.Lstat(f.regSock)
			if err != nil {
				t.Fatal(err)
			}
			if perm := st.Mode().Perm(); perm != 0o600 {
				t.Errorf("registration socket mode %v, want 0600", perm)
			}

			f.kubeletRegister(t)
			r.waitLog(t, 1, "kubelet confirmed the registration", "driver="+testDriver, "socket="+f.regSock, "outcome=registered")
			r.waitLog(t, 1, "GetInfo from the kubelet") // -v=5 enables debug lines

			// The kubelet restarts: it registers again on the same socket.
			f.kubeletRegister(t)

			r.signal(t, tc.sig)
			if code := r.wait(t); code != 0 {
				t.Errorf("exit code after %v: %d, want 0", tc.sig, code)
			}
			assertGone(t, f.regSock)
			if len(linesWith(r.stderr.String(), "registration socket removed", "driver="+testDriver, "socket="+f.regSock, "outcome=removed")) != 1 {
				t.Errorf("no log line about removing the socket")
			}
			if len(linesWith(r.stderr.String(), "signal received", tc.sig.String())) != 1 {
				t.Errorf("no log line naming the signal %v", tc.sig)
			}
			if r.stdout.String() != "" {
				t.Errorf("the registrar wrote to stdout: %q", r.stdout.String())
			}

			// The driver stops the same way.
			f.driver.signal(t, tc.sig)
			if code := f.driver.wait(t); code != 0 {
				t.Errorf("driver exit code after %v: %d, want 0", tc.sig, code)
			}
			assertGone(t, f.driverSock)
			f.driver.waitLog(t, 1, "CSI driver stopped", "driver="+testDriver, "socket="+f.driverSock, "outcome=removed")
		})
	}
}

// TestExecStaleSocket: the socket a SIGKILLed registrar left behind is
// replaced by the next run.
func TestExecStaleSocket(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r1 := f.startRegistrar(t)
	r1.waitLog(t, 1, "registration socket created", "outcome=serving")
	stale := inode(t, f.regSock)
	r1.signal(t, syscall.SIGKILL)
	if code := r1.wait(t); code != -1 {
		t.Fatalf("SIGKILL: exit code %d", code)
	}
	if !isSocket(f.regSock) || inode(t, f.regSock) != stale {
		t.Fatal("premise: a SIGKILLed registrar leaves its socket behind")
	}
	if c, err := net.Dial("unix", f.regSock); !errors.Is(err, syscall.ECONNREFUSED) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("premise: nobody serves the stale socket; dial: %v", err)
	}

	r2 := f.startRegistrar(t)
	r2.waitLog(t, 1, "registration socket created", "driver="+testDriver, "socket="+f.regSock, "outcome=serving")
	// The file system may give the new socket the old inode number: that it
	// is a new socket shows in that it answers.
	f.kubeletRegister(t)
	if lines := linesWith(r2.stderr.String(), "outcome=conflict"); len(lines) != 0 {
		t.Errorf("the stale socket was taken for a conflict: %q", lines)
	}
	r2.waitLog(t, 1, "kubelet confirmed the registration", "outcome=registered")
	r2.signal(t, syscall.SIGTERM)
	if code := r2.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	assertGone(t, f.regSock)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func httpGet(url string) (int, string, error) {
	rsp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(b), err
}

// TestExecLiveSocketConflict: a socket another live process serves at the
// registration path is never removed; the registrar reports the conflict in
// its log and on /readyz.
func TestExecLiveSocketConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ln, err := net.Listen("unix", f.regSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The holder answers every connection; one that sends "x" is the test
	// checking that this listener still owns the path.
	ours := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				if n, _ := c.Read(b); n == 1 && b[0] == 'x' {
					ours <- struct{}{}
				}
			}()
		}
	}()
	ino := inode(t, f.regSock)

	base := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	r := f.startRegistrar(t, "--http-endpoint="+strings.TrimPrefix(base, "http://"))
	// The first attempt and at least one retry (after a backoff) both leave it alone.
	r.waitLog(t, 2, "registration socket not created", "driver="+testDriver, "socket="+f.regSock, "outcome=conflict", "another live process")

	// The status is published after each of those lines: /readyz says so.
	code, body, err := httpGet(base + "/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !containsAll(body, "socket conflict", f.regSock) {
		t.Errorf("/readyz during a conflict: %d %q %v, want 503 naming the conflict and %s", code, body, err, f.regSock)
	}
	if code, body, err = httpGet(base + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz during a conflict: %d %q %v, want 200", code, body, err)
	}

	r.signal(t, syscall.SIGTERM)
	if code := r.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if !isSocket(f.regSock) || inode(t, f.regSock) != ino {
		t.Fatal("the other process's socket was replaced or removed")
	}
	c, err := net.Dial("unix", f.regSock)
	if err != nil {
		t.Fatalf("the other process's socket no longer answers: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ours:
	case <-time.After(waitTimeout):
		t.Fatalf("the holder's listener did not answer at the path within %s", waitTimeout)
	}
	if lines := linesWith(r.stderr.String(), "registration socket removed"); len(lines) != 0 {
		t.Errorf("the registrar claims to have removed a socket: %q", lines)
	}
}

// TestExecRegularFileConflict: a regular file at the registration path is
// refused and left as it was.
func TestExecRegularFileConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const content = "not a socket, keep me\n"
	if err := os.WriteFile(f.regSock, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	ino := inode(t, f.regSock)
	r := f.startRegistrar(t)
	r.waitLog(t, 1, "registration socket not created", "driver="+testDriver, "socket="+f.regSock, "outcome=not-a-socket", "regular file")
	r.signal(t, syscall.SIGTERM)
	if code := r.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	got, err := os.ReadFile(f.regSock)
	if err != nil || string(got) != content || inode(t, f.regSock) != ino {
		t.Errorf("the regular file changed: %q, %v", got, err)
	}
}

// TestExecProbe: `probe` exits 0 against a serving driver, 1 with a one-line
// reason against a socket that does not exist.
func TestExecProbe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, addr := range []string{f.driverSock, "unix://" + f.driverSock} {
		res := runProc(t, binary, "probe", "--csi-address="+addr)
		if res.code != 0 || !strings.Contains(res.stdout, "ready") {
			t.Errorf("probe %s: want exit 0 and \"ready\"; %s", addr, res)
		}
	}
	missing := filepath.Join(f.dir, "missing.sock")
	res := runProc(t, binary, "probe", "--csi-address="+missing, "--timeout=1s")
	if res.code != exitError {
		t.Fatalf("probe of a missing socket: want exit %d; %s", exitError, res)
	}
	reason := strings.TrimRight(res.stderr, "\n")
	if strings.Contains(reason, "\n") || !containsAll(reason, "not ready", missing) {
		t.Errorf("want one line naming the socket; got %q", res.stderr)
	}
}

// TestExecRegularFileAsDriverSocket: the driver will not serve on, and the
// registrar will not dial, a path that is a regular file; the file is kept.
func TestExecRegularFileAsDriverSocket(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "cr")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "csi.sock")
	const content = "precious data\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "reg")
	if err := os.Mkdir(reg, 0o755); err != nil {
		t.Fatal(err)
	}

	res := runProc(t, binary, "driver", "--endpoint=unix://"+file, "--node-id="+testNodeID)
	if res.code != exitError || !containsAll(res.stderr, file, "regular file") {
		t.Errorf("driver on a regular file: want exit 1 naming the file; %s", res)
	}
	res = runProc(t, binary, "register", "--csi-address="+file, "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock",
		"--plugin-registration-path="+reg)
	if res.code != exitError || !containsAll(res.stderr, file, "regular file", "not a socket") {
		t.Errorf("registrar dialing a regular file: want exit 1 naming the file; %s", res)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != content {
		t.Errorf("the file changed: %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(reg); len(entries) != 0 {
		t.Errorf("the registrar created %v", entries)
	}
}

// TestExecCommandLine: exit codes and output of the binary itself.
func TestExecCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bin    string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{bin: binary, args: []string{"--version"}, stdout: "csi-registrar " + version + "\n"},
		{bin: binary, args: []string{"version"}, stdout: "csi-registrar " + version + "\n"},
		{bin: upstreamAlias, args: []string{"--version"}, stdout: "csi-registrar " + version + "\n"},
		{bin: upstreamAlias, args: []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/csi-hostpath/csi.sock", "--mode=kubelet-registration-probe"},
			code: exitError, stderr: []string{"error: no registrar is running in this container: no state file "}},
		{bin: binary, args: []string{"register", "--bogus"}, code: exitBadInput, stderr: []string{"-bogus"}},
		{bin: upstreamAlias, args: []string{"--v=5"}, code: exitBadInput, stderr: []string{"--kubelet-registration-path", "is required"}},
		{bin: binary, args: []string{"driver", "--node-id=n", "--driver-name=a_b"}, code: exitBadInput, stderr: []string{`"a_b"`}},
	} {
		t.Run(filepath.Base(tc.bin)+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			res := runProc(t, tc.bin, tc.args...)
			if res.code != tc.code || (tc.code == 0 && res.stdout != tc.stdout) || !containsAll(res.stderr, tc.stderr...) {
				t.Errorf("want exit %d, stdout %q, stderr containing %q; %s", tc.code, tc.stdout, tc.stderr, res)
			}
		})
	}
}

// TestExecStopWhileWaitingForDriver: a registrar still waiting for its driver
// exits 0 on SIGTERM and has created nothing.
func TestExecStopWhileWaitingForDriver(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "cr")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	reg := filepath.Join(dir, "reg")
	if err := os.Mkdir(reg, 0o755); err != nil {
		t.Fatal(err)
	}
	r := startProc(t, binary, "register", "--csi-address="+filepath.Join(dir, "csi.sock"),
		"--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock", "--plugin-registration-path="+reg)
	// The signal handler is installed before this line is written.
	r.waitLog(t, 1, "starting csi-registrar register")
	r.signal(t, syscall.SIGTERM)
	if code := r.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if entries, _ := os.ReadDir(reg); len(entries) != 0 {
		t.Errorf("created %v while waiting for the driver", entries)
	}
}

// TestExecSocketDeleted: when the registration socket is deleted under a
// running registrar (upstream keeps running blind), it is created again and
// the kubelet can register through it.
func TestExecSocketDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.startRegistrar(t)
	r.waitLog(t, 1, "registration socket created", "outcome=serving")
	f.kubeletRegister(t)
	if err := os.Remove(f.regSock); err != nil {
		t.Fatal(err)
	}
	r.waitLog(t, 1, "registration socket created", "reason=deleted", "driver="+testDriver, "socket="+f.regSock, "outcome=serving")
	f.kubeletRegister(t)
	r.signal(t, syscall.SIGTERM)
	if code := r.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	assertGone(t, f.regSock)
}

// TestExecMissingRegistrationDir: a --plugin-registration-path that does not
// exist is an error naming the flag (exit 1), once the driver answered.
func TestExecMissingRegistrationDir(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	missing := filepath.Join(f.dir, "no-such-dir")
	res := runProc(t, binary, "register", "--csi-address="+f.driverSock, "--kubelet-registration-path="+f.driverSock,
		"--plugin-registration-path="+missing)
	if res.code != exitError || !containsAll(res.stderr, "--plugin-registration-path", missing) {
		t.Errorf("want exit 1 naming --plugin-registration-path; %s", res)
	}
	if fileExists(missing) {
		t.Errorf("%s was created", missing)
	}
}

// TestExecSIGTERMWithHostileClients: a client that sends nothing and one
// that holds a call open do not keep SIGTERM from ending the process, which
// promises to exit within ShutdownTimeout plus a second. The limit below is a
// hang guard with room for a loaded machine (upstream's Stop waited 120 s).
func TestExecSIGTERMWithHostileClients(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.startRegistrar(t)
	r.waitLog(t, 1, "registration socket created", "outcome=serving")
	silent, err := net.Dial("unix", f.regSock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	held, err := registrartest.HoldCall(f.regSock, "/pluginregistration.Registration/GetInfo")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	start := time.Now()
	r.signal(t, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(registrar.DefaultShutdownTimeout + 4*time.Second):
		t.Fatalf("still running %s after SIGTERM with a silent and a held client", time.Since(start).Round(time.Millisecond))
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if code := r.state.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	assertGone(t, f.regSock)
}
