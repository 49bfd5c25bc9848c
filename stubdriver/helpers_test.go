package stubdriver_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// socketDir returns a new, short directory for a unix socket (sun_path holds
// at most 107 bytes, and t.TempDir paths can be longer than that).
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	if len(dir)+len("/csi.sock") > csiplugin.MaxSocketPathLength {
		// $TMPDIR is too deep for a socket; /tmp always fits.
		os.RemoveAll(dir)
		if dir, err = os.MkdirTemp("/tmp", "sd"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// running is a driver started by startDriver.
type running struct {
	path   string           // socket path
	conn   *grpc.ClientConn // client connection to the socket
	cancel context.CancelFunc
	exited chan struct{} // closed when Run has returned
	err    error         // Run's result, valid once exited is closed
}

// stop cancels Run and returns its result.
func (r *running) stop() error {
	r.cancel()
	<-r.exited
	return r.err
}

func (r *running) identity() csi.IdentityClient { return csi.NewIdentityClient(r.conn) }
func (r *running) node() csi.NodeClient         { return csi.NewNodeClient(r.conn) }

// quietLogger discards the driver's log lines.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startDriver runs a driver with opts on a fresh socket (unless opts.Endpoint
// is set) and returns once it answers Probe. The test fails if Run returns
// before that. Run is stopped, and its error checked, at cleanup.
func startDriver(t testing.TB, opts stubdriver.Options) *running {
	t.Helper()
	if opts.Endpoint == "" {
		opts.Endpoint = "unix://" + filepath.Join(socketDir(t), "csi.sock")
	}
	if opts.NodeID == "" {
		opts.NodeID = "node-1"
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	path, err := csiplugin.ParseEndpoint(opts.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	d, err := stubdriver.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{path: path, cancel: cancel, exited: make(chan struct{})}
	go func() { r.err = d.Run(ctx); close(r.exited) }()

	r.conn, err = dial(path)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.conn.Close()
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// Wait for the driver to serve, or for Run to give up: no fixed delay.
	waitCtx, waitDone := context.WithCancel(context.Background())
	defer waitDone()
	go func() {
		select {
		case <-r.exited:
			waitDone()
		case <-waitCtx.Done():
		}
	}()
	if _, err := r.identity().Probe(waitCtx, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		select {
		case <-r.exited:
			t.Fatalf("Run returned before serving: %v", r.err)
		default:
			t.Fatalf("Probe: %v", err)
		}
	}
	return r
}

// dial returns a client for the socket at path. The connection is retried
// quickly: the socket may not exist yet when the first attempt is made, and
// gRPC's default first retry comes a second later.
func dial(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: 20 * time.Second,
		}))
}

// inode returns the inode number and type of path, not following symlinks.
func inode(t testing.TB, path string) (uint64, fs.FileMode) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino, st.Mode().Type()
}

// asValidationError returns err as a *csiplugin.ValidationError or fails.
func asValidationError(t testing.TB, err error) *csiplugin.ValidationError {
	t.Helper()
	var ve *csiplugin.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *csiplugin.ValidationError", err, err)
	}
	return ve
}
