//go:build e2e

package e2e

import (
	"context"
	"net"
)

// DialNode dials a unix socket of the local node: a host path (the
// provider is a drivercases.Dialer).
func (p *localProvider) DialNode(ctx context.Context, node, path string) (net.Conn, error) {
	if err := p.checkNode(node); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
