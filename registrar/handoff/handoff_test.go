package handoff_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/handoff"
)

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "ho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestBind: a free path is bound, a dead socket replaced (a new inode), a
// live one and a file that is no socket left alone.
func TestBind(t *testing.T) {
	d := shortDir(t)
	p := filepath.Join(d, "r.sock")
	s, replaced, err := handoff.Bind("unix", p)
	if err != nil || replaced || !s.Owns(p) {
		t.Fatalf("free path: %v, replaced %v, owns %v", err, replaced, err == nil && s.Owns(p))
	}
	if _, _, err := handoff.Bind("unix", p); !errors.Is(err, handoff.ErrLive) {
		t.Fatalf("live socket: got %v, want ErrLive", err)
	}
	s.Close() // no unlink: a dead socket stays
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("Close unlinked the socket: %v", err)
	}
	s2, replaced, err := handoff.Bind("unix", p)
	if err != nil || !replaced || s2.ID == s.ID || s.Owns(p) || !s2.Owns(p) {
		t.Fatalf("dead socket: %v, replaced %v, new id %v old %v", err, replaced, s2.ID, s.ID)
	}
	defer s2.Close()
	f := filepath.Join(d, "file")
	os.WriteFile(f, nil, 0o600)
	if _, _, err := handoff.Bind("unix", f); !errors.Is(err, handoff.ErrNotSocket) {
		t.Fatalf("regular file: got %v, want ErrNotSocket", err)
	}
	if s.RemoveIfOwned(p) {
		t.Fatal("removed a socket that is not its own")
	}
	if !s2.RemoveIfOwned(p) {
		t.Fatal("did not remove its own socket")
	}
}

// TestPassListener: the descriptor and its file's identity pass over a
// rendezvous; the receiver accepts on the same socket file.
func TestPassListener(t *testing.T) {
	d := shortDir(t)
	reg, _, err := handoff.Bind("unix", filepath.Join(d, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	rv, err := handoff.BindOver("unixpacket", filepath.Join(d, "rv.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	got := make(chan *handoff.Socket, 1)
	go func() {
		p, err := handoff.Accept(rv)
		if err != nil {
			got <- nil
			return
		}
		p.Recv()
		p.Send(handoff.Message{Driver: "a.sock", Registered: true}, reg)
	}()
	p, err := handoff.Dial(filepath.Join(d, "rv.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Send(handoff.Message{Driver: "b.sock"}, nil); err != nil {
		t.Fatal(err)
	}
	m, l, err := p.Recv()
	if err != nil || l == nil || !m.Registered || m.Driver != "a.sock" || l.ID != reg.ID {
		t.Fatalf("hello: %+v, listener %v, %v", m, l, err)
	}
	reg.Close() // the sender's copy gone: the receiver's still accepts
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("b"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", filepath.Join(d, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil || b[0] != 'b' {
		t.Fatalf("read %q, %v", b, err)
	}
	c.Close()
	l.Close()
}

// TestLink: the link is swapped atomically and removed only when it names
// the caller's target.
func TestLink(t *testing.T) {
	d := shortDir(t)
	l := handoff.Link{Dir: d, Name: "csi-endpoint.sock"}
	if tg, err := l.Target(); err != nil || tg != "" {
		t.Fatalf("no link: %q, %v", tg, err)
	}
	for _, tg := range []string{"a.sock", "b.sock"} {
		if err := l.Swap(tg); err != nil {
			t.Fatal(err)
		}
		if got, _ := l.Target(); got != tg {
			t.Fatalf("target %q, want %q", got, tg)
		}
	}
	if err := l.Swap("../x.sock"); err == nil {
		t.Fatal("a path as target was accepted")
	}
	if removed, _ := l.RemoveIf("a.sock"); removed {
		t.Fatal("removed a link that names another target")
	}
	if removed, _ := l.RemoveIf("b.sock"); !removed {
		t.Fatal("did not remove its own link")
	}
	os.WriteFile(l.Path(), nil, 0o600)
	if err := l.Swap("a.sock"); err == nil {
		t.Fatal("replaced a regular file at the link's path")
	}
}
