// Package grpcserve runs a gRPC server on a listener and stops it within a
// bound, whatever its clients do. The registrar and the reference driver
// share it.
//
// grpc.Server.GracefulStop waits for every connection to close, and both
// GracefulStop and Stop wait for connections still in the HTTP/2 handshake:
// a client that connects and sends nothing holds either for the server's
// connection timeout (120 s by default), and one that starts a call and never
// sends its body holds GracefulStop forever. So NewServer sets a short
// handshake timeout, and Serving.Stop drains for at most its grace period,
// then stops hard and closes every accepted connection itself.
package grpcserve

import (
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// HandshakeTimeout is how long a new connection may take to send the HTTP/2
// preface. Clients are local (the kubelet over a unix socket) and send it
// within milliseconds; a silent one is dropped after this.
const HandshakeTimeout = 3 * time.Second

// NewServer returns grpc.NewServer(opts...) with the handshake bounded by
// HandshakeTimeout.
func NewServer(opts ...grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append([]grpc.ServerOption{grpc.ConnectionTimeout(HandshakeTimeout)}, opts...)...)
}

// Serving is a gRPC server serving one listener.
type Serving struct {
	srv   *grpc.Server
	conns *trackingListener
	done  chan struct{}
	err   error // of Serve; read after done is closed

	stopOnce sync.Once
}

// Serve starts srv on ln in a goroutine it owns; Stop ends it.
func Serve(srv *grpc.Server, ln net.Listener) *Serving {
	s := &Serving{srv: srv, conns: &trackingListener{Listener: ln, conns: map[*trackedConn]struct{}{}}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = srv.Serve(s.conns)
		if errors.Is(s.err, grpc.ErrServerStopped) {
			s.err = nil // Stop came before Serve started
		}
	}()
	return s
}

// Done is closed when Serve has returned (after Stop, or when the listener
// failed); Err then tells why.
func (s *Serving) Done() <-chan struct{} { return s.done }

// Err returns Serve's error once Done is closed: nil after Stop.
func (s *Serving) Err() error {
	<-s.done
	return s.err
}

// Stop stops accepting, lets running calls finish for up to grace, then
// cancels the rest and closes every connection, and waits until the server
// has let go of them. It returns within grace plus the time the handlers take
// to notice their cancelled contexts, and reports whether the drain finished
// within grace. Calling it again returns at once.
func (s *Serving) Stop(grace time.Duration) (graceful bool) {
	graceful = true
	s.stopOnce.Do(func() {
		drained := make(chan struct{})
		go func() {
			s.srv.GracefulStop()
			close(drained)
		}()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-drained:
		case <-t.C:
			graceful = false
			// Closing the raw connections ends the handshakes Stop would
			// wait for; Stop then cancels the running calls.
			s.conns.closeAll()
			s.srv.Stop()
			<-drained
		}
		<-s.done
	})
	return graceful
}

// trackingListener remembers the connections it accepted until they close.
type trackingListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool // closeAll ran: close new connections at once
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return tc, nil // gRPC finds it closed at its first read
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[*trackedConn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
