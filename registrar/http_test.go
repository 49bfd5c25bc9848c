package registrar_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// startWithHTTP starts a registrar with its HTTP endpoint on a free loopback
// port and every HTTP timeout set to timeouts, and returns it and the
// endpoint's address, read from its log.
func startWithHTTP(t *testing.T, e env, timeouts time.Duration) (*registrar.Registrar, string) {
	t.Helper()
	var logs logBuffer
	r := newRegistrar(t, nil, e, &logs, func(o *registrar.Options) { o.HTTPEndpoint = "127.0.0.1:0" })
	r.SetHTTPTimeouts(timeouts)
	start(t, r.Run)
	served := regexp.MustCompile(`msg="serving health and metrics" .*endpoint=(\S+)`)
	l := awaitLog(t, &logs, "the HTTP endpoint's address", func(l string) bool { return served.MatchString(l) })
	return r, served.FindStringSubmatch(l)[1]
}

// keptAlive is a client connection that made one request and keeps the
// connection open, as an HTTP/1.1 client does.
type keptAlive struct {
	conn net.Conn
	r    *bufio.Reader
}

func request(t *testing.T, addr string) *keptAlive {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return &keptAlive{conn: c, r: bufio.NewReader(c)}
}

// response reads the response, waiting at most limit (a hang guard).
func (k *keptAlive) response(limit time.Duration) error {
	k.conn.SetReadDeadline(time.Now().Add(limit))
	rsp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rsp.Body)
	rsp.Body.Close()
	return err
}

// closedByServer waits (at most limit) for the server to close the connection.
func (k *keptAlive) closedByServer(limit time.Duration) error {
	k.conn.SetReadDeadline(time.Now().Add(limit))
	_, err := k.r.ReadByte()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Issue 18 item 4 and issue 22 item 5: the HTTP endpoint keeps at most
// HTTPMaxConns connections open. One beyond the cap is served at once, and
// the oldest connection without a request in progress (the first kept-alive
// one) is closed by the server to make room; the others stay open.
func TestHTTPEndpointLimitsConnections(t *testing.T) {
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	const guard = 30 * time.Second // hang guard only; the server's timeouts are longer
	_, addr := startWithHTTP(t, e, 10*guard)
	idle := make([]*keptAlive, registrar.HTTPMaxConns)
	for i := range idle {
		idle[i] = request(t, addr)
		if err := idle[i].response(guard); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	extra := request(t, addr)
	if err := extra.response(guard); err != nil {
		t.Fatalf("connection %d beyond the cap of %d was not served: %v", len(idle)+1, registrar.HTTPMaxConns, err)
	}
	if err := idle[0].closedByServer(guard); err != nil {
		t.Fatalf("the oldest connection was not closed to make room: %v", err)
	}
	// The second-oldest is still open: a request on it is answered.
	if _, err := io.WriteString(idle[1].conn, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := idle[1].response(guard); err != nil {
		t.Fatalf("a kept-alive connection within the cap was closed: %v", err)
	}
}

// Issue 13 item 6: the library's error names the option, not a flag (cmd
// maps Options.HTTPEndpoint back to --http-endpoint).
func TestHTTPEndpointInUseNamesOption(t *testing.T) {
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r, err := registrar.New(registrar.Options{CSIAddress: e.driverSock, KubeletRegistrationPath: e.driverSock,
		PluginRegistrationPath: e.regDir, HTTPEndpoint: busy.Addr().String(), Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Options.HTTPEndpoint "+busy.Addr().String()) || strings.Contains(err.Error(), "--http-endpoint") {
		t.Fatalf("Run = %v, want an error naming Options.HTTPEndpoint and the address, and no flag", err)
	}
}
