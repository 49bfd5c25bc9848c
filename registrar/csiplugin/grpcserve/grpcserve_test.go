package grpcserve_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/grpcserve"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

type registration struct {
	registerapi.UnimplementedRegistrationServer
}

func (registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Name: "x"}, nil
}

func serve(t *testing.T) (*grpcserve.Serving, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	g := grpcserve.NewServer()
	registerapi.RegisterRegistrationServer(g, registration{})
	return grpcserve.Serve(g, ln), path
}

// stopWithin stops s and fails if that takes longer than grace plus one
// second: a hang guard for the bound the package promises, not a speed test.
func stopWithin(t *testing.T, s *grpcserve.Serving, grace time.Duration) {
	t.Helper()
	start := time.Now()
	returned := make(chan bool, 1)
	go func() { returned <- s.Stop(grace) }()
	select {
	case <-returned:
	case <-time.After(grace + time.Second):
		t.Fatalf("Stop(%s) still waiting after %s", grace, time.Since(start).Round(time.Millisecond))
	}
}

// Issue 18 item 1: a client that holds a connection open must not hold
// Stop. One that connects and sends nothing (no HTTP/2 preface): grpc's
// Stop and GracefulStop both wait for the handshake, 120 s by default. A
// call whose body never comes holds GracefulStop forever.
func TestStopWithStuckClient(t *testing.T) {
	for _, c := range []struct {
		name    string
		connect func(path string) (net.Conn, error)
	}{
		{"silent connection", func(path string) (net.Conn, error) { return net.Dial("unix", path) }},
		{"held call", func(path string) (net.Conn, error) {
			return registrartest.HoldCall(path, "/pluginregistration.Registration/GetInfo")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, path := serve(t)
			conn, err := c.connect(path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stopWithin(t, s, 200*time.Millisecond)
		})
	}
}

// A server without such clients stops gracefully.
func TestStopGraceful(t *testing.T) {
	s, _ := serve(t)
	if !s.Stop(time.Minute) {
		t.Fatal("Stop reported a forced stop with no client connected")
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err after Stop = %v, want nil", err)
	}
}
