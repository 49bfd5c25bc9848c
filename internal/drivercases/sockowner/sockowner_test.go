package sockowner

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run runs the script on this host, as the local node's provider does.
func run(t *testing.T, path string) Finding {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", Script, "sh", path).Output()
	if err != nil {
		t.Fatalf("script: %v", err)
	}
	f, err := Parse("host", path, string(out))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A real listening socket of this process is found, and its process is
// named; a pod without this process's container gets the error that says
// what was tried.
func TestFindsListeningProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := run(t, path)
	var me *Owner
	for i, o := range f.Owners {
		if o.PID == os.Getpid() {
			me = &f.Owners[i]
		}
	}
	if me == nil {
		t.Fatalf("this process (pid %d) listens on %s; owners found: %+v (scanned %d processes, %d sockets)", os.Getpid(), path, f.Owners, f.Procs, f.Sockets)
	}
	// The pod's containers: this process's container (if the test runs in
	// one) is the driver; without it, the error names what was tried.
	if me.ContainerID != "" {
		name, err := f.Container("p", map[string]string{"driver": me.ContainerID, "other": strings.Repeat("0", 64)})
		if err != nil || name != "driver" {
			t.Errorf("Container: %q, %v; want driver", name, err)
		}
	}
	_, err = f.Container("p", map[string]string{"registrar": strings.Repeat("a", 64)})
	if err == nil {
		t.Fatal("a socket owned outside the pod's containers: no error")
	}
	for _, want := range []string{"in no container of the pod", "/proc/<pid>/fd", "/proc/<pid>/net/unix", "/proc/<pid>/cgroup", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// A socket file whose listener is gone (a leftover) has no owner: the error
// says so and what was tried.
func TestLeftoverSocketHasNoOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	f := run(t, path)
	if f.ID == "" || len(f.Owners) != 0 {
		t.Fatalf("leftover socket: %+v", f)
	}
	_, err = f.Container("p", map[string]string{"driver": strings.Repeat("a", 64)})
	if err == nil || !strings.Contains(err.Error(), "no process on node host listens on") || !strings.Contains(err.Error(), "tried:") {
		t.Errorf("error %v, want one naming the leftover and what was tried", err)
	}
}

func TestMissingAndNotSocket(t *testing.T) {
	dir := t.TempDir()
	f := run(t, filepath.Join(dir, "none.sock"))
	if _, err := f.Container("p", nil); !f.Missing || err == nil || !strings.Contains(err.Error(), "no file at") {
		t.Errorf("missing: %+v, %v", f, err)
	}
	reg := filepath.Join(dir, "file")
	if err := os.WriteFile(reg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f = run(t, reg)
	if _, err := f.Container("p", nil); !f.NotSocket || err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("regular file: %+v, %v", f, err)
	}
}

func TestParseRejectsTruncatedOutput(t *testing.T) {
	if _, err := Parse("n", "/x", "target 1:2\n"); err == nil {
		t.Error("output without its scanned line: no error")
	}
	if _, err := Parse("n", "/x", "what\nscanned 1 1\n"); err == nil {
		t.Error("unknown line: no error")
	}
}
