package main

import (
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecNodeStatusOffMakesNoAPICall: without --node-condition and
// --remove-startup-taint the registrar registers, is confirmed and stops
// without ever connecting to the API server its environment names
// (KUBERNETES_SERVICE_HOST/PORT point at a listener that counts
// connections). With --node-condition it does read that configuration: it
// refuses to start without the service account's CA, naming the mount.
func TestExecNodeStatusOffMakesNoAPICall(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := make(chan string, 64) // the remote address of each connection accepted
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	apiEnv := []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port, "KUBE_NODE_NAME=node-1"}

	f := newFixture(t)
	r := startProcEnv(t, apiEnv, binary, append([]string{"register"}, f.registerArgs()...)...)
	r.waitLog(t, 1, "registration socket created", "outcome=serving")
	f.kubeletRegister(t)
	r.waitLog(t, 1, "kubelet confirmed the registration", "outcome=registered")
	r.signal(t, syscall.SIGTERM)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// With --node-condition the same process reads the in-cluster
	// configuration: it first needs the token's CA, not mounted here.
	res := runProcEnv(t, apiEnv, binary, append([]string{"register", "--node-condition=" + testDriver + "/NodePluginRegistered"}, f.registerArgs()...)...)
	if res.code == 0 || !strings.Contains(res.stderr, "automountServiceAccountToken must be true") {
		t.Errorf("with --node-condition and no token: %s; want a failure naming the token mount", res)
	}

	// The listener counts: a connection of the test's own is accepted after
	// any the processes made (the backlog is in order), and is the only one.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for others := 0; ; others++ {
		select {
		case a := <-conns:
			if a != c.LocalAddr().String() {
				t.Errorf("the API server's address got a connection from %s; the registrar without the Node readiness flags must make none", a)
				continue
			}
		case <-time.After(waitTimeout):
			t.Fatal("the listener did not accept the test's connection")
		}
		break
	}
}

// TestExecNodeStatusBadFlags: a bad condition type or taint key is refused
// with exit code 2, naming the value and the rule.
func TestExecNodeStatusBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-condition=Node Ready", "--node-name=n"}, `invalid Node condition type "Node Ready"`},
		{[]string{"--remove-startup-taint=Example.com/x", "--node-name=n"}, `invalid startup taint key "Example.com/x"`},
		{[]string{"--node-condition=example.com/Registered"}, "invalid node name \"\": must be set when a Node condition or a startup taint is"},
	} {
		res := runProcEnv(t, nil, binary, append([]string{"register", "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock"}, tc.args...)...)
		if res.code != exitBadInput || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%q: %s; want exit code 2 and %q", tc.args, res, tc.want)
		}
	}
}

// startProcEnv is startProc with extra environment variables.
func startProcEnv(t *testing.T, extra []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = append(childEnv(), extra...)
	p.start(t)
	p.killAtEnd(t, bin, args)
	return p
}

func runProcEnv(t *testing.T, extra []string, bin string, args ...string) result {
	t.Helper()
	p := startProcEnv(t, extra, bin, args...)
	code := p.wait(t)
	return result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}
