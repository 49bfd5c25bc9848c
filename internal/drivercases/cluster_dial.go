package drivercases

import (
	"context"
	"fmt"
	"net"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// nodeConn opens a gRPC client on the unix socket at path on node. It
// connects on the first call: a missing socket fails that call (Unavailable,
// with the dial error), as it fails the kubelet's.
func nodeConn(d Dialer, node, path string) (*grpc.ClientConn, error) {
	return csiplugin.Dial(path,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return d.DialNode(ctx, node, path) }))
}

// RegistrationInfo calls GetInfo on a registration socket on node, as the
// kubelet's plugin watcher does.
func RegistrationInfo(ctx context.Context, d Dialer, node, socket string) (*registerapi.PluginInfo, error) {
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
func AskDriver(ctx context.Context, d Dialer, node, socket string) (DriverInfo, error) {
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
