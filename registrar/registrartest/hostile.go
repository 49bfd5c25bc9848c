package registrartest

import (
	"bytes"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HoldCall connects to the gRPC server at socketPath as a hostile HTTP/2
// client would: it completes the handshake and starts a call of method
// (e.g. "/pluginregistration.Registration/GetInfo") whose request body it
// never sends. The call stays open until the returned connection is closed.
func HoldCall(socketPath, method string) (net.Conn, error) {
	c, err := net.DialTimeout("unix", socketPath, time.Second)
	if err != nil {
		return nil, err
	}
	if err := holdCall(c, method); err != nil {
		c.Close()
		return nil, fmt.Errorf("start a held call of %s on %s: %w", method, socketPath, err)
	}
	return c, nil
}

func holdCall(c net.Conn, method string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return err
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	for { // until the server's SETTINGS: the handshake is done
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			if err := fr.WriteSettingsAck(); err != nil {
				return err
			}
			break
		}
	}
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "localhost"},
		{":path", method}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes(), EndHeaders: true})
}

// OpenHostileHTTP opens n connections to the HTTP server at addr (host:port)
// as hostile clients on the pod network would, and keeps them open: the
// even ones are kept alive after one complete request whose response is
// never read, the odd ones are slowloris, sending a request line and one
// header but never the blank line that ends the headers. Close the returned
// connections to release them.
func OpenHostileHTTP(addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, fmt.Errorf("hostile connection %d of %d to %s: %w", i+1, n, addr, err)
		}
		req := "GET /metrics HTTP/1.1\r\nHost: hostile\r\n\r\n" // kept alive
		if i%2 == 1 {
			req = "GET /healthz HTTP/1.1\r\nHost: slowloris\r\n" // no end of headers
		}
		if _, err := c.Write([]byte(req)); err != nil {
			c.Close()
			for _, c := range conns {
				c.Close()
			}
			return nil, fmt.Errorf("hostile connection %d of %d to %s: %w", i+1, n, addr, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}
