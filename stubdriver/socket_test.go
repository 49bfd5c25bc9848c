package stubdriver_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// runOnce calls Run with a context that is already cancelled: Run must fail
// while taking the socket, or else serve nothing and return at once, so a
// wrong outcome cannot hang the test.
func runOnce(t *testing.T, path string) error {
	t.Helper()
	d, err := stubdriver.New(stubdriver.Options{Endpoint: path, NodeID: "node-1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return d.Run(ctx)
}

func TestRunRemovesSocketWhenStopped(t *testing.T) {
	d := startDriver(t, stubdriver.Options{})
	st, err := os.Lstat(d.path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != fs.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with mode 0600", st.Mode())
	}
	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v, want nil after cancel", err)
	}
	if _, err := os.Lstat(d.path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after Run returned: %v", err)
	}
}

func TestRunReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "csi.sock")
	// A socket file nobody listens on, as a killed driver leaves behind.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, typ := inode(t, path); typ != fs.ModeSocket {
		t.Fatalf("stale socket not in place: %v", typ)
	}

	d := startDriver(t, stubdriver.Options{Endpoint: "unix://" + path})
	rsp, err := d.identity().GetPluginInfo(bg, &csi.GetPluginInfoRequest{})
	if err != nil || rsp.GetName() != stubdriver.DefaultName {
		t.Fatalf("GetPluginInfo on the replaced socket = %v, %v", rsp, err)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after Run returned: %v", err)
	}
}

func TestRunRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "csi.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ino, _ := inode(t, path)

	err = runOnce(t, path)
	var ce *sockfile.ListenError
	if !errors.As(err, &ce) || ce.Kind != sockfile.KindInUse {
		t.Fatalf("Run = %v, want a *sockfile.ListenError of kind in_use", err)
	}
	if ce.Path != path {
		t.Errorf("ListenError.Path = %q, want %q", ce.Path, path)
	}
	if got, typ := inode(t, path); got != ino || typ != fs.ModeSocket {
		t.Errorf("socket changed: inode %d (%v), want %d", got, typ, ino)
	}
	// Our listener still owns the path.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live socket no longer answers: %v", err)
	}
	conn.Close()
}

func TestRunRefusesOtherFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		create func(path string) error
	}{
		{"regular file", func(p string) error { return os.WriteFile(p, []byte("keep me\n"), 0o644) }},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"symlink to a missing file", func(p string) error { return os.Symlink(p+".missing", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(socketDir(t), "csi.sock")
			if err := tc.create(path); err != nil {
				t.Fatal(err)
			}
			before, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			ino, typ := inode(t, path)

			err = runOnce(t, path)
			var ce *sockfile.ListenError
			if !errors.As(err, &ce) || ce.Kind != sockfile.KindNotSocket {
				t.Fatalf("Run = %v, want a *sockfile.ListenError of kind not_socket", err)
			}
			after, err := os.Lstat(path)
			if err != nil {
				t.Fatalf("the %s is gone: %v", tc.name, err)
			}
			if gotIno, gotTyp := inode(t, path); gotIno != ino || gotTyp != typ ||
				after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
				t.Errorf("the %s was touched: %v %d → %v %d", tc.name, before.Mode(), before.Size(), after.Mode(), after.Size())
			}
			if typ == 0 {
				if b, err := os.ReadFile(path); err != nil || string(b) != "keep me\n" {
					t.Errorf("file content = %q, %v", b, err)
				}
			}
		})
	}
}

// TestRunLeavesForeignSocket checks that Run, when it stops, does not remove a
// socket that another process put at its path in the meantime.
func TestRunLeavesForeignSocket(t *testing.T) {
	d := startDriver(t, stubdriver.Options{})
	if err := os.Remove(d.path); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ino, _ := inode(t, d.path)

	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, typ := inode(t, d.path); got != ino || typ != fs.ModeSocket {
		t.Errorf("foreign socket changed: inode %d (%v), want %d", got, typ, ino)
	}
}
