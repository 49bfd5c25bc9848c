package registrar

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/grpcserve"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// plainVersion is the CSI version announced, as node-driver-registrar
// announces it.
const plainVersion = "1.0.0"

// registrationServer serves pluginregistration.v1 on one registration socket.
// It answers GetInfo from fixed data and records what the kubelet told it;
// the control loop reads that record after each signal.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer

	driverName string
	endpoint   string
	hooks      serverHooks

	mu       sync.Mutex
	getInfos int
	notified *registerapi.RegistrationStatus // last status, nil before the first
	// answered is getInfos at the last Notify: a GetInfo after it is a
	// registration the kubelet has not finished.
	answered int

	signal chan struct{} // capacity 1: "something was recorded"
}

// serverHooks lets the owner count and log RPCs without the server knowing how.
type serverHooks struct {
	onGetInfo func()
	onNotify  func(*registerapi.RegistrationStatus)
}

func newRegistrationServer(driverName, endpoint string, hooks serverHooks) *registrationServer {
	return &registrationServer{driverName: driverName, endpoint: endpoint, hooks: hooks, signal: make(chan struct{}, 1)}
}

// fromKubelet reports whether a call may be the kubelet's, i.e. does not carry
// csiplugin.NotKubeletUserAgent.
func fromKubelet(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, ua := range md.Get("user-agent") {
		if strings.HasPrefix(ua, csiplugin.NotKubeletUserAgent) {
			return false
		}
	}
	return true
}

// GetInfo is called by the kubelet's plugin watcher (with a 1 s deadline).
func (s *registrationServer) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	if !fromKubelet(ctx) { // doctor, or our own reconcile: answered, not counted, not signalled
		return s.info(), nil
	}
	s.mu.Lock()
	s.getInfos++
	s.mu.Unlock()
	if s.hooks.onGetInfo != nil {
		s.hooks.onGetInfo()
	}
	s.notify()
	return s.info(), nil
}

func (s *registrationServer) info() *registerapi.PluginInfo {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driverName,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{plainVersion},
	}
}

// NotifyRegistrationStatus records the kubelet's verdict. It never exits the
// process: the control loop decides what to do.
func (s *registrationServer) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.mu.Lock()
	s.notified = &registerapi.RegistrationStatus{PluginRegistered: st.PluginRegistered, Error: st.Error}
	s.answered = s.getInfos
	s.mu.Unlock()
	if s.hooks.onNotify != nil {
		s.hooks.onNotify(st)
	}
	s.notify()
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (s *registrationServer) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// registering reports whether the kubelet called GetInfo and has not sent
// its NotifyRegistrationStatus since: a registration in progress.
func (s *registrationServer) registering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getInfos > s.answered
}

// snapshot returns how many GetInfo calls arrived and the last status.
func (s *registrationServer) snapshot() (getInfos int, last *registerapi.RegistrationStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getInfos, s.notified
}

// servingSocket is a registration socket with its gRPC server running.
type servingSocket struct {
	sock    *sockfile.Socket
	server  *registrationServer
	serving *grpcserve.Serving
	grace   time.Duration // Options.ShutdownTimeout
}

// serveRegistration serves srv on sock until stop. grace bounds how long
// stop lets running calls finish.
func serveRegistration(sock *sockfile.Socket, srv *registrationServer, grace time.Duration) *servingSocket {
	// The messages are a few hundred bytes: small per-connection buffers (gRPC
	// shares write buffers between connections by default) keep a flood of
	// kubelet-like clients from costing 64 KiB of buffers per connection.
	// grpcserve bounds the handshake: a client that sends nothing is dropped.
	g := grpcserve.NewServer(grpc.ReadBufferSize(4096), grpc.WriteBufferSize(4096))
	registerapi.RegisterRegistrationServer(g, srv)
	ss := &servingSocket{sock: sock, server: srv, grace: grace}
	ss.serving = grpcserve.Serve(g, sock.Listener())
	return ss
}

// stop removes the socket if it still is ours (so the kubelet sees the
// unlink at once, and the path is free for the next socket), then ends
// serving: running calls get up to grace to finish, then are cancelled and
// their connections closed. It never waits on a client for longer than grace,
// and reports whether the file was removed.
func (ss *servingSocket) stop() bool {
	removed := ss.sock.Close()
	ss.serving.Stop(ss.grace)
	return removed
}
