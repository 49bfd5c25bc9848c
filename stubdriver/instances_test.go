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
// the driver on a node (manifests/, the rolling-update mode): the old pod's and
// the new pod's, each on a socket named by its pod's UID, both on the one
// state directory (a hostPath) and registering in the rolling-update mode in
// the one registration directory. The driver's state is the mount table and
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
		// The kubelet registers the instance's announcement (the newest
		// instance announces; the older one stands by).
		logs.waitLog(t, "registration socket created")
		reg := announcement(t, registry, uid)
		if reg == "" {
			t.Fatalf("no announcement socket of pod %s in %s", uid, registry)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := registrartest.Register(ctx, reg)
		cancel()
		if err != nil || r.Err != nil {
			t.Fatalf("the kubelet's registration of %s: %v, %v", reg, err, r.Err)
		}
		if r.Info.Endpoint != sock {
			t.Errorf("%s announces %s, want its own socket %s", reg, r.Info.Endpoint, sock)
		}
		logs.waitLog(t, "kubelet confirmed")
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
	if reg := announcement(t, registry, uids[0]); reg != "" {
		t.Errorf("the stopped instance's announcement socket is still there: %s", reg)
	}
	if reg := announcement(t, registry, uids[1]); reg == "" {
		t.Errorf("the other instance's announcement socket is gone")
	}
	unpublish(newer, id2, t2)
}

// announcement returns the path of the latest announcement socket of the
// instance whose pod has uid in the registration directory, or "".
func announcement(t *testing.T, registry, uid string) string {
	t.Helper()
	entries, err := os.ReadDir(registry)
	if err != nil {
		t.Fatal(err)
	}
	var latest string
	var version uint64
	for _, e := range entries {
		inst, v, ok := csiplugin.ParseRollingUpdateSocketName(stubdriver.DefaultName, e.Name())
		if ok && inst == csiplugin.InstanceID(uid) && v >= version {
			latest, version = filepath.Join(registry, e.Name()), v
		}
	}
	return latest
}
