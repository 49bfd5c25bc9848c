package csiplugin_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// TestDialAnyPath: Dial reaches a socket whose path holds characters a URL
// gives meaning to ('%', '?', '#').
func TestDialAnyPath(t *testing.T) {
	dir, err := os.MkdirTemp("", "dial")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sub := filepath.Join(dir, "100%s%[1]s%%?q#f")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "csi.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := csiplugin.Dial(path)
	if err != nil {
		t.Fatalf("Dial(%q): %v", path, err)
	}
	defer conn.Close()
	conn.Connect()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Dial(%q) did not connect to the socket", path)
	}
}
