package stubdriver_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// TestTwoInstances: a DaemonSet rolling with maxSurge runs two instances of
// the driver on a node (manifests/, the handover): the old pod's and the new
// pod's, each on a socket named by its pod's UID, both on the one state
// directory (a hostPath) and sharing the one registration socket, whose
// endpoint, a link beside their sockets, follows the newest instance. The driver's state is the mount table and
// the state directory, shared: a volume published by one instance is
// unpublished by the other (the kubelet sends the unpublish to whichever
// endpoint it holds then), even once the first one has stopped. Stopping one
// instance removes its own socket and leaves the other's, which still serves.
func TestTwoInstances(t *testing.T) {
	needBindMounts(t)
	state, pods := filepath.Join(t.TempDir(), "state"), t.TempDir()
	t.Cleanup(func() { unmountUnder(t, pods) }) // runs after the drivers stop
	dir := socketDir(t)
	registry := filepath.Join(dir, "registry")
	if err := os.Mkdir(registry, 0o750); err != nil {
		t.Fatal(err)
	}
	uids := []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"}
	reg := filepath.Join(registry, stubdriver.DefaultName+csiplugin.RegistrationSocketSuffix)
	link := filepath.Join(dir, "csi-endpoint.sock")
	var drivers []*running
	for _, uid := range uids {
		sock := filepath.Join(dir, uid+".sock")
		var logs logBuffer
		drivers = append(drivers, startDriver(t, stubdriver.Options{
			Endpoint:       "unix://" + sock,
			StateDir:       state,
			KubeletPodsDir: pods,
			Register: &registrar.Options{
				KubeletRegistrationPath: sock, // the node's path: the test runs on the "node"
				PluginRegistrationPath:  registry,
				RollingUpdate:           uid,
			},
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		}))
		// The newest instance's driver is the endpoint link's target.
		logs.waitLog(t, "the endpoint link points at this instance's driver")
		if got, err := os.Readlink(link); err != nil || got != filepath.Base(sock) {
			t.Fatalf("the endpoint link %s: %q, %v; want a link to %s", link, got, err, filepath.Base(sock))
		}
		if len(drivers) > 1 {
			continue
		}
		// The kubelet registers the one registration socket, once: after it
		// is bound, which comes after the link.
		logs.waitLog(t, "serving the registration socket")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := registrartest.Register(ctx, reg)
		cancel()
		if err != nil {
			t.Fatalf("the kubelet's registration of %s: %v\n%s", reg, err, logs.String())
		}
		if r.Err != nil {
			t.Fatalf("the kubelet's registration of %s: the registrar answered %v", reg, r.Err)
		}
		if r.Info.Endpoint != link {
			t.Errorf("%s announces %s, want the endpoint link %s", reg, r.Info.Endpoint, link)
		}
		logs.waitLog(t, "the kubelet confirmed the registration")
	}
	older, newer := drivers[0], drivers[1]

	target := func(name string) string {
		d := filepath.Join(pods, name)
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(d, "mount")
	}
	unpublish := func(d *running, id, target string) {
		t.Helper()
		if _, err := d.node().NodeUnpublishVolume(bg, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("unpublish %s on %s: %v", id, filepath.Base(d.path), err)
		}
		if n := len(mountsAt(t, target)); n != 0 {
			t.Errorf("%d mounts left at %s", n, target)
		}
		if _, err := os.Lstat(filepath.Join(state, id)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("volume directory of %s left: %v", id, err)
		}
	}

	// Published on the newer, unpublished on the older (a rollout undone).
	id1, t1 := kubeletVolumeID("newer"), target("pod-1")
	if _, err := newer.node().NodePublishVolume(bg, publishReq(id1, t1, false)); err != nil {
		t.Fatal(err)
	}
	unpublish(older, id1, t1)

	// Published on the older, which then stops; unpublished on the newer.
	id2, t2 := kubeletVolumeID("older"), target("pod-2")
	if _, err := older.node().NodePublishVolume(bg, publishReq(id2, t2, false)); err != nil {
		t.Fatal(err)
	}
	ino, _ := inode(t, newer.path)
	older.conn.Close()
	if err := older.stop(); err != nil {
		t.Fatalf("Run of the older instance: %v", err)
	}
	if _, err := os.Lstat(older.path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stopped instance's socket is still there: %v", err)
	}
	if n := len(mountsAt(t, t2)); n != 1 {
		t.Errorf("stopping an instance changed the mounts: %d at %s, want 1", n, t2)
	}
	if got, typ := inode(t, newer.path); got != ino || typ != fs.ModeSocket {
		t.Errorf("the other instance's socket was replaced or removed (inode %d → %d, %v)", ino, got, typ)
	}
	if _, err := newer.identity().Probe(bg, &csi.ProbeRequest{}); err != nil {
		t.Errorf("the other instance no longer answers: %v", err)
	}
	if _, err := os.Lstat(reg); err != nil {
		t.Errorf("the registration socket is gone: %v", err)
	}
	if got, err := os.Readlink(link); err != nil || got != filepath.Base(newer.path) {
		t.Errorf("the endpoint link %s: %q, %v; want a link to the other instance's %s", link, got, err, filepath.Base(newer.path))
	}
	unpublish(newer, id2, t2)
}
