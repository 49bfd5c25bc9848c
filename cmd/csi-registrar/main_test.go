package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/nodestatus"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// Shared by the tests that run the built binary (exec_test.go).
var (
	binary        string // the csi-registrar binary built by TestMain
	upstreamAlias string // a symlink to it named csi-node-driver-registrar
)

// waitTimeout is how long a test waits for an outcome before it fails. It is
// a deadline for "never happened", not a performance assertion.
const waitTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "csi-registrar-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create binary directory:", err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "csi-registrar")
		build := exec.Command(goTool(), "build", "-o", binary, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "go build:", err)
			return 1
		}
		upstreamAlias = filepath.Join(dir, upstreamName)
		if err := os.Symlink(binary, upstreamAlias); err != nil {
			fmt.Fprintln(os.Stderr, "symlink:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	// GOROOT is set by the go command for the tests it runs.
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" && fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// result is the outcome of one in-process run().
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runInProcess calls run() like main does, with r as the roles. It fails the
// test if run does not return within waitTimeout (a role that was expected to
// refuse its input started instead).
func runInProcess(t *testing.T, r roles, args ...string) result {
	t.Helper()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(args, &stdout, &stderr, r) }()
	select {
	case code := <-done:
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	case <-time.After(waitTimeout):
		t.Fatalf("run(%q) did not return within %s; it probably started serving.\nstderr:\n%s", args, waitTimeout, stderr.String())
		return result{}
	}
}

// capture records what the roles were called with, instead of starting anything.
type capture struct {
	register      []registrar.Options
	nodeStatus    []nodestatus.Options
	driver        []stubdriver.Options
	registerCalls int
	driverCalls   int
}

func (c *capture) roles() roles {
	return roles{
		register: func(_ context.Context, o registrar.Options, ns nodestatus.Options) error {
			c.registerCalls++
			c.register = append(c.register, o)
			c.nodeStatus = append(c.nodeStatus, ns)
			return nil
		},
		driver: func(_ context.Context, o stubdriver.Options) error {
			c.driverCalls++
			c.driver = append(c.driver, o)
			return nil
		},
	}
}

// syncBuffer is safe for a writer and concurrent readers, who can wait for
// what is written (registrartest.Buffer). Tests wait on events: a log line
// (proc.waitLog), a file's creation (waitPath), the process's exit
// (proc.wait); only the benchmarks poll (waitFor, process_bench_test.go).
type syncBuffer struct{ registrartest.Buffer }

// waitPath waits until path exists (a file watcher's event), failing the
// test after waitTimeout.
func waitPath(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := registrartest.WaitPath(ctx, path); err != nil {
		t.Fatal(err)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// linesWith returns the log lines of s that match every one of subs: a sub
// key=value matches a line (klog text or JSON, parsed) whose value of key is
// value; any other sub matches a line that contains it.
func linesWith(s string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if lineMatches(l, subs) {
			out = append(out, l)
		}
	}
	return out
}

func lineMatches(line string, subs []string) bool {
	_, kv, parsed := parseLogLine(line)
	for _, sub := range subs {
		k, v, isKV := strings.Cut(sub, "=")
		if isKV && parsed && k != "" && !strings.ContainsAny(k, " \"") {
			if got, ok := kv[k]; ok && got == v {
				continue
			}
		}
		if !strings.Contains(line, sub) {
			return false
		}
	}
	return true
}

// clearEnv unsets the variables for the duration of the test (t.Setenv
// restores them afterwards).
func clearEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "")
		os.Unsetenv(n)
	}
}

// clearPrefixedEnv unsets every CSI_REGISTRAR_* variable and KUBE_NODE_NAME so
// that the environment running the tests cannot change their outcome.
func clearPrefixedEnv(t *testing.T) {
	t.Helper()
	names := []string{"KUBE_NODE_NAME"}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix) {
			names = append(names, name)
		}
	}
	clearEnv(t, names...)
}
