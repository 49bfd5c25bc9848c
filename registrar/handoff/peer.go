package handoff

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Message is what two registrars of one driver tell each other over their
// rendezvous connection, one message per packet. The first message of each
// side is a hello; the older side's hello carries the registration socket's
// descriptor when it holds one.
type Message struct {
	// Version of this message format; a peer of another version is refused.
	Version int `json:"v"`
	// Driver is the sender's driver socket: a base name in the endpoint
	// link's directory.
	Driver string `json:"driver,omitempty"`
	// Registered: the kubelet confirmed the registration on the socket the
	// sender serves (or inherited, as the receiver does now).
	Registered bool `json:"registered,omitempty"`
	// Rejected is the kubelet's last error, when it refused the registration.
	Rejected string `json:"rejected,omitempty"`
	// About is the identity of the registration socket that Registered and
	// Rejected are about: the one the sender served when it sent them. It
	// is zero when the sender serves none (and from a sender that predates
	// the field).
	About FileID `json:"about,omitzero"`
	// Foreign: the sender holds no registration socket because another
	// process (node-driver-registrar) serves the path; the receiver waits
	// for that path to be freed as well.
	Foreign bool `json:"foreign,omitempty"`
	// Rejoin: the sender is an older instance whose newer peers all left,
	// joining the newest one; it needs no socket.
	Rejoin bool `json:"rejoin,omitempty"`
	// Leaving: the sender was told to stop; the receiver answers with
	// Staying, or Leaving when it is stopping too.
	Leaving bool `json:"leaving,omitempty"`
	// Staying answers Leaving: the sender keeps running.
	Staying bool `json:"staying,omitempty"`
	// Socket is the identity of the file of the socket whose descriptor
	// comes with the message.
	Socket FileID `json:"socket,omitzero"`
}

// ProtocolVersion is Message.Version as this build speaks it.
const ProtocolVersion = 1

// Peer is one rendezvous connection to another registrar of the driver.
type Peer struct {
	c *net.UnixConn
}

// Dial connects to the rendezvous socket at path.
func Dial(path string) (*Peer, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return &Peer{c: c}, nil
}

// Accept waits for the next peer on a rendezvous listener.
func Accept(l *Socket) (*Peer, error) {
	c, err := l.AcceptUnix()
	if err != nil {
		return nil, err
	}
	return &Peer{c: c}, nil
}

// SetDeadline bounds the next Send and Recv; the zero time removes the bound.
func (p *Peer) SetDeadline(t time.Time) error { return p.c.SetDeadline(t) }

// Close ends the connection; the other side reads an end of file.
func (p *Peer) Close() error { return p.c.Close() }

// Send writes m, with a copy of reg's descriptor and its identity when reg
// is not nil.
func (p *Peer) Send(m Message, reg *Socket) error {
	m.Version = ProtocolVersion
	m.Socket = FileID{}
	if reg != nil {
		m.Socket = reg.ID
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if reg != nil {
		if err := control(reg.UnixListener, func(fd int) error { oob = syscall.UnixRights(fd); return nil }); err != nil {
			return err
		}
	}
	_, _, err = p.c.WriteMsgUnix(b, oob, nil)
	return err
}

// Recv reads the next message and the listener whose descriptor came with
// it, if any. At the peer's end it returns io.EOF.
func (p *Peer) Recv() (Message, *Socket, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := p.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return Message{}, nil, err
	}
	if n == 0 && oobn == 0 {
		return Message{}, nil, errEOF
	}
	l, lerr := listenerFrom(oob[:oobn])
	var m Message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		if l != nil {
			l.Close()
		}
		return Message{}, nil, fmt.Errorf("handover message %q: %w", buf[:n], err)
	}
	if m.Version != ProtocolVersion {
		if l != nil {
			l.Close()
		}
		return Message{}, nil, fmt.Errorf("handover message of version %d, this registrar speaks %d: run one release of csi-registrar on a node at a time, or roll through a release that speaks both", m.Version, ProtocolVersion)
	}
	if l == nil {
		return m, nil, lerr
	}
	return m, &Socket{UnixListener: l, ID: m.Socket}, lerr
}

// listenerFrom turns the descriptors in a control message into the one
// listener it may carry; extra descriptors are closed.
func listenerFrom(oob []byte) (*net.UnixListener, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		rights, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, rights...)
	}
	if len(fds) == 0 {
		return nil, nil
	}
	for _, fd := range fds[1:] {
		syscall.Close(fd)
	}
	f := os.NewFile(uintptr(fds[0]), "registration socket")
	defer f.Close() // FileListener keeps a copy
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("handed-over descriptor: %w", err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("handed-over descriptor is a %T, not a unix socket listener", ln)
	}
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// errEOF is what Recv returns when the peer closed the connection.
var errEOF = fmt.Errorf("handover peer closed the connection: %w", io.EOF)
