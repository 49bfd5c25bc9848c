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
