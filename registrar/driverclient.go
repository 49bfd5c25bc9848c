package registrar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// driverClient is the registrar's connection to the CSI driver's socket. The
// gRPC connection re-connects by itself; ResetBackoff makes it try at once
// (called when the socket file is created again).
type driverClient struct {
	path    string
	timeout time.Duration
	conn    *grpc.ClientConn
	ident   csi.IdentityClient
}

func newDriverClient(path string, timeout time.Duration) (*driverClient, error) {
	conn, err := csiplugin.Dial(path)
	if err != nil {
		return nil, err
	}
	return &driverClient{path: path, timeout: timeout, conn: conn, ident: csi.NewIdentityClient(conn)}, nil
}

func (d *driverClient) Close() error { return d.conn.Close() }

// ResetBackoff makes a disconnected client try to connect immediately.
func (d *driverClient) ResetBackoff() { d.conn.ResetConnectBackoff() }

// PluginName asks the driver for its name (Identity.GetPluginInfo).
func (d *driverClient) PluginName(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	rsp, err := d.ident.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", fmt.Errorf("GetPluginInfo on %s: %w", d.path, err)
	}
	return rsp.GetName(), nil
}

// Probe calls Identity.Probe and returns an error unless the driver is ready.
func (d *driverClient) Probe(ctx context.Context) error {
	return probe(ctx, d.ident, d.path, d.timeout)
}

func probe(ctx context.Context, ident csi.IdentityClient, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rsp, err := ident.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("Probe on %s: %w", path, err)
	}
	// An unset ready field means ready (CSI spec).
	if r := rsp.GetReady(); r != nil && !r.GetValue() {
		return fmt.Errorf("Probe on %s: %w", path, errNotReady)
	}
	return nil
}

// ProbeDriver dials the CSI driver at address (a path or unix:// URL), calls
// Identity.Probe with the given timeout and returns nil if the driver is ready.
// It is what `csi-registrar probe` runs as an exec liveness probe.
func ProbeDriver(ctx context.Context, address string, timeout time.Duration) error {
	path, err := csiplugin.ParseEndpoint(address)
	if err != nil {
		return err
	}
	// Without a socket there is nothing to wait for.
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("Probe on %s: %w", path, err)
	}
	conn, err := csiplugin.Dial(path)
	if err != nil {
		return err
	}
	defer conn.Close()
	return probe(ctx, csi.NewIdentityClient(conn), path, timeout)
}

// errNotReady is returned by probe when the driver answers ready=false.
var errNotReady = errors.New("driver reports not ready")

// retryable reports whether a failed driver call may succeed later: the driver
// is not listening yet, or did not answer in time.
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNotReady) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
