//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// NodeDialer is a Provider whose nodes' unix sockets this process can dial:
// the local node, where the node is this host. With it the driver suite asks
// the registration socket (GetInfo) and the driver (NodeGetInfo) what they
// tell the kubelet, as the kubelet asks them; without it (kind) it checks
// what the kubelet wrote, for consistency only.
type NodeDialer interface {
	DialNode(ctx context.Context, node, path string) (net.Conn, error)
}

// DialNode dials a unix socket of the local node: a host path.
func (p *localProvider) DialNode(ctx context.Context, node, path string) (net.Conn, error) {
	if err := p.checkNode(node); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// nodeConn opens a gRPC client on the unix socket at path on node. It
// connects on the first call: a missing socket fails that call (Unavailable,
// with the dial error), as it fails the kubelet's.
func nodeConn(d NodeDialer, node, path string) (*grpc.ClientConn, error) {
	return csiplugin.Dial(path,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return d.DialNode(ctx, node, path) }))
}

// RegistrationInfo calls GetInfo on a registration socket on node, as the
// kubelet's plugin watcher does.
func RegistrationInfo(ctx context.Context, d NodeDialer, node, socket string) (*registerapi.PluginInfo, error) {
	conn, err := nodeConn(d, node, socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("GetInfo on %s on node %s: %w", socket, node, err)
	}
	return info, nil
}

// DriverInfo is what a CSI driver tells the kubelet about itself on a node.
type DriverInfo struct {
	Name string // GetPluginInfo
	Node *csi.NodeGetInfoResponse
}

// AskDriver calls GetPluginInfo and NodeGetInfo on the driver's socket on
// node, as the kubelet calls NodeGetInfo when it registers the driver.
func AskDriver(ctx context.Context, d NodeDialer, node, socket string) (DriverInfo, error) {
	var di DriverInfo
	conn, err := nodeConn(d, node, socket)
	if err != nil {
		return di, err
	}
	defer conn.Close()
	pi, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return di, fmt.Errorf("GetPluginInfo on %s on node %s: %w", socket, node, err)
	}
	di.Name = pi.GetName()
	if di.Node, err = csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil {
		return di, fmt.Errorf("NodeGetInfo on %s on node %s: %w", socket, node, err)
	}
	return di, nil
}
