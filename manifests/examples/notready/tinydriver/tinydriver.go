// Package tinydriver is the small CSI node driver of the non-compliant
// examples in manifests/examples/notready/: just enough to publish a CSI
// inline volume (a directory of its own on the node, bind-mounted at the
// target path) and to register through csi-registrar. Each example's main
// turns on one fault that makes the driver not ready for csi-registrar's
// handover (--rolling-update); without a fault it is ready: it keeps its volumes on
// the node, serves ShutdownDelay after SIGTERM and removes only its own
// socket. It is an example of faults, not a driver to copy: the reference
// driver is stubdriver.
package tinydriver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Faults are the ways an example is not ready for the mode.
type Faults struct {
	// VolumesInMemory: the volumes published are known from this process's
	// memory only; NodeUnpublishVolume of another instance's volume answers
	// NotFound (and leaves it mounted).
	VolumesInMemory bool
	// VolumesLoadedAtStart: the volumes are read from the node (the state
	// directory) once at start, then kept in this process's memory; a volume
	// another instance published after this one started is unknown to it:
	// NodeUnpublishVolume answers NotFound (and leaves it mounted).
	VolumesLoadedAtStart bool
	// StopAtSIGTERM: stop serving at once on SIGTERM.
	StopAtSIGTERM bool
	// RemoveOtherSockets: at start, remove every socket in the socket
	// directory (another instance's too), as a naive "stale socket" cleanup.
	RemoveOtherSockets bool
}

// Main runs the driver with the command line's flags and the faults.
func Main(f Faults) {
	endpoint := flag.String("endpoint", "/csi/csi.sock", "the unix socket to serve (unix:// optional)")
	name := flag.String("driver-name", "notready.csi.example.com", "the CSI driver name")
	nodeID := flag.String("node-id", "", "the node ID (NodeGetInfo)")
	stateDir := flag.String("state-dir", "/var/lib/csi-notready", "the node directory holding one directory per volume")
	delay := flag.Duration("shutdown-delay", 5*time.Second, "how long to serve after SIGTERM")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	d := &driver{name: *name, nodeID: *nodeID, stateDir: *stateDir, faults: f, log: log, known: map[string]bool{}}
	if f.VolumesLoadedAtStart {
		vols, err := os.ReadDir(*stateDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Error("read the state directory", "err", err)
			os.Exit(1)
		}
		for _, v := range vols {
			d.known[v.Name()] = true
		}
		log.Info("volumes read from the node once, at start (fault)", "volumes", len(d.known))
	}
	if err := d.run(strings.TrimPrefix(*endpoint, "unix://"), *delay); err != nil {
		log.Error("driver stopped", "err", err)
		os.Exit(1)
	}
}

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	name, nodeID, stateDir string
	faults                 Faults
	log                    *slog.Logger

	mu    sync.Mutex
	known map[string]bool // VolumesInMemory, VolumesLoadedAtStart: this instance's volumes
}

func (d *driver) run(sock string, delay time.Duration) error {
	if d.faults.RemoveOtherSockets {
		others, _ := filepath.Glob(filepath.Join(filepath.Dir(sock), "*.sock"))
		for _, o := range others {
			if o != sock {
				d.log.Info("removing a socket at start (fault: not this instance's)", "path", o)
				_ = os.Remove(o)
			}
		}
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", sock) // Close removes the socket file
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	d.log.Info("serving", "socket", sock, "faults", fmt.Sprintf("%+v", d.faults))
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if d.faults.StopAtSIGTERM {
		d.log.Info("SIGTERM: stopping at once (fault)")
		srv.Stop()
		return nil
	}
	d.log.Info("SIGTERM: serving a while longer", "delay", delay)
	time.Sleep(delay)
	srv.GracefulStop()
	return nil
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "0.0.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := r.GetVolumeId(), r.GetTargetPath()
	if id == "" || target == "" || strings.Contains(id, "/") {
		return nil, status.Errorf(codes.InvalidArgument, "volume id %q and target path %q: both required, the id without /", id, target)
	}
	src := filepath.Join(d.stateDir, id)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !mounted(target) {
		if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
			return nil, status.Errorf(codes.Internal, "bind mount %s at %s: %v", src, target, err)
		}
	}
	d.mu.Lock()
	d.known[id] = true
	d.mu.Unlock()
	d.log.Info("published", "volume", id, "target", target)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := r.GetVolumeId(), r.GetTargetPath()
	if d.faults.VolumesInMemory || d.faults.VolumesLoadedAtStart {
		d.mu.Lock()
		ok := d.known[id]
		d.mu.Unlock()
		if !ok {
			return nil, status.Errorf(codes.NotFound, "volume id %s does not exist in the volumes list", id)
		}
	}
	if mounted(target) {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	_ = os.RemoveAll(filepath.Join(d.stateDir, id))
	d.mu.Lock()
	delete(d.known, id)
	d.mu.Unlock()
	d.log.Info("unpublished", "volume", id, "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mounted reports whether path is a mount point (its device differs from
// its parent's, or the mount table lists it).
func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
