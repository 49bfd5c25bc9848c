package csiplugin

import (
	"context"
	"net"
	"net/url"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial makes a lazily connecting gRPC client for the unix socket at path, as
// the kubelet dials plugin sockets: a plain path, insecure transport,
// authority "localhost". The reconnect backoff is short (10 ms doubling to
// 1 s) so a server that comes back is seen quickly. opts come after these
// and override them (e.g. grpc.WithContextDialer to reach the socket another
// way, grpc.WithUserAgent). Any path works, one with '%' or '?' included:
// it is escaped into the target's URL, which gRPC parses.
func Dial(path string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	target := (&url.URL{Scheme: "passthrough", Path: "/" + path}).String()
	return grpc.NewClient(target, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 2, Jitter: 0.1, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
	}, opts...)...)
}
