// Package stubdriver is a minimal CSI node driver: the Identity service and
// the Node service's NodeGetInfo, plus what every correct node-only driver must
// answer. It exists so that the kubelet's registration path can be run end to
// end, and as the template a new driver starts from:
//
//   - driver.go          options, validation, serving the CSI socket
//   - identityserver.go  GetPluginInfo, GetPluginCapabilities, Probe
//   - nodeserver.go      NodeGetInfo, NodeGetCapabilities, publish argument checks
//
// To start a driver of your own, copy the package, rename DefaultName, and
// replace the Node methods that do the real work.
package stubdriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// DefaultName is the driver name used when Options.Name is empty.
const DefaultName = "stub.csi.example.com"

// MaxNodeIDLength is the longest node ID the API server accepts in CSINode.
const MaxNodeIDLength = 192

// Options configure a Driver.
type Options struct {
	// Endpoint is the socket to serve: a unix:// URL or a path.
	Endpoint string
	// Name is reported by GetPluginInfo. Default DefaultName.
	Name string
	// VendorVersion is reported by GetPluginInfo.
	VendorVersion string
	// NodeID is reported by NodeGetInfo; the kubelet writes it to the Node
	// annotation and CSINode. Required, at most 192 bytes.
	NodeID string
	// MaxVolumesPerNode is reported by NodeGetInfo; 0 means not set.
	MaxVolumesPerNode int64
	// Topology is the node's accessible topology (label key → value). When it
	// is not empty the driver advertises VOLUME_ACCESSIBILITY_CONSTRAINTS.
	Topology map[string]string
	// Logger receives one line per served socket event. Default slog.Default().
	Logger *slog.Logger
}

// Driver serves the CSI Identity and Node services.
type Driver struct {
	opts Options
	log  *slog.Logger
	path string
}

// New checks opts and returns a Driver. Errors are *registrar.ValidationError.
func New(opts Options) (*Driver, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	path, err := registrar.ParseEndpoint(opts.Endpoint)
	if err != nil {
		var ve *registrar.ValidationError
		if errors.As(err, &ve) {
			ve.What = "--endpoint"
		}
		return nil, err
	}
	if err := registrar.ValidateDriverName(opts.Name); err != nil {
		return nil, err
	}
	if err := validateNodeID(opts.NodeID); err != nil {
		return nil, err
	}
	if opts.MaxVolumesPerNode < 0 {
		return nil, &registrar.ValidationError{What: "--max-volumes-per-node", Value: fmt.Sprint(opts.MaxVolumesPerNode),
			Rule: "must not be negative", Fix: "use 0 for no limit"}
	}
	for k, v := range opts.Topology {
		if err := validateTopology(k, v); err != nil {
			return nil, err
		}
	}
	// Keep a copy: the caller's map may change after New, and the driver must
	// serve the topology that was validated (without racing with the caller).
	opts.Topology = maps.Clone(opts.Topology)
	return &Driver{opts: opts, path: path, log: opts.Logger.With("driver", opts.Name, "socket", path)}, nil
}

func validateNodeID(id string) error {
	fix := "pass --node-id=$(KUBE_NODE_NAME) with KUBE_NODE_NAME from the downward API (spec.nodeName)"
	if strings.TrimSpace(id) == "" {
		return &registrar.ValidationError{What: "node ID", Value: id, Rule: "must not be empty", Fix: fix}
	}
	if len(id) > MaxNodeIDLength {
		return &registrar.ValidationError{What: "node ID", Value: id,
			Rule: fmt.Sprintf("is %d bytes long, the limit is %d", len(id), MaxNodeIDLength), Fix: fix}
	}
	return nil
}

// Run serves the CSI socket until ctx ends, then stops gracefully and removes
// the socket. A stale socket at the path is replaced; a live one, or a file
// that is not a socket, is an error and is left alone.
func (d *Driver) Run(ctx context.Context) error {
	sock, err := registrar.Listen(d.path)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, &identityServer{opts: &d.opts})
	csi.RegisterNodeServer(srv, &nodeServer{opts: &d.opts})

	served := make(chan error, 1)
	go func() { served <- srv.Serve(sock.Listener()) }()
	d.log.Info("CSI driver serving", "nodeID", d.opts.NodeID, "outcome", "serving")

	select {
	case <-ctx.Done():
		err = nil
	case err = <-served:
		err = fmt.Errorf("serve %s: %w", d.path, err)
	}
	gracefulStop(srv, 5*time.Second)
	if sock.Close() {
		d.log.Info("CSI driver stopped; socket removed", "outcome", "removed")
	} else {
		d.log.Info("CSI driver stopped; the file at the socket path is not ours, left in place", "outcome", "kept")
	}
	return err
}

// gracefulStop lets running calls finish for up to grace, then stops hard.
func gracefulStop(srv *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
}
