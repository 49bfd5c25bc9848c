package registrar

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The rolling-update mode's channel between the instances of one driver on
// a node: a second gRPC service on each announcement socket. The kubelet
// calls only the Registration service, so it never sees this one. Each
// instance streams its state to whoever watches it; a stream that ends
// means the socket went away (the instance retired it, or died).
//
// The service is csiregistrar.handover.v1.Handover with one server-streaming
// method, Watch(google.protobuf.Empty) returning a stream of
// google.protobuf.BytesValue, each the JSON of an InstanceState. Fields may
// be added; none is ever removed or changes meaning (instances of different
// releases meet in a rollout).
const (
	handoverService = "csiregistrar.handover.v1.Handover"
	handoverWatch   = "/" + handoverService + "/Watch"
)

// InstanceState is what an instance tells the others (and csi-registrar
// doctor, through FetchInstanceState).
type InstanceState struct {
	Driver   string `json:"driver"`
	Instance string `json:"instance"`
	// Birth is when the instance's pod first ran (Unix ms): the newest
	// instance is the one that should hold the registration.
	Birth int64 `json:"birth"`
	// Version is that of its latest announcement (0: none yet).
	Version uint64 `json:"version"`
	// Confirmed: the kubelet confirmed the latest announcement.
	Confirmed bool `json:"confirmed"`
	// ConfirmedAt is when the kubelet last sent it NotifyRegistrationStatus(true)
	// (Unix ms, 0 never): the kubelet acted on the latest of these last.
	ConfirmedAt int64 `json:"confirmedAt"`
	// Failed: the kubelet's RegisterPlugin failed on its latest
	// announcement (which the CSI handler answers by unregistering the
	// driver, whoever registered it).
	Failed bool `json:"failed"`
	// Terminating: the instance is ending and never announces again.
	Terminating bool `json:"terminating"`
	// Withdrawn is the version of the latest announcement the instance
	// unlinked by name because the kubelet never asked it (0: none): that
	// Remove changes nothing for the kubelet, which never registered it.
	Withdrawn uint64 `json:"withdrawn,omitempty"`
	// Successor is the instance this one, leaving, checked live as
	// confirmed by the kubelet after it, and retired its sockets for
	// ("" none): the kubelet holds that instance's endpoint, which need not
	// announce again.
	Successor string `json:"successor,omitempty"`
	// Removed names the dead announcement sockets (of any instance) this
	// one unlinked by name, last, because no running kubelet holds them
	// (made before the boot, or dead when the kubelet restarted): those
	// Removes change nothing for the kubelet.
	Removed []string `json:"removed,omitempty"`
}

// NewerThan reports whether s should hold the registration rather than o.
func (s InstanceState) NewerThan(o InstanceState) bool {
	if s.Birth != o.Birth {
		return s.Birth > o.Birth
	}
	return s.Instance > o.Instance
}

// FetchInstanceState asks the rolling-update instance serving the
// announcement socket at path for its state, once, within ctx: a node tool
// (csi-registrar doctor) reading who holds a driver's registration. Its
// error is an *InstanceStateError.
func FetchInstanceState(ctx context.Context, path string) (InstanceState, error) {
	st, err := fetchState(ctx, path)
	if err != nil {
		return InstanceState{}, &InstanceStateError{Path: path, Err: err}
	}
	return st, nil
}

// InstanceStateError is why FetchInstanceState read no state: the socket
// refused the connection (a dead instance), does not serve the handover
// service (not an instance of the rolling-update mode), or did not answer
// within the deadline.
type InstanceStateError struct {
	Path string // the socket asked
	Err  error  // the cause: the dial's error, or the gRPC status of the Watch call
}

func (e *InstanceStateError) Error() string {
	return "no instance state from " + e.Path + ": " + errText(e.Err)
}

func (e *InstanceStateError) Unwrap() error { return e.Err }

// handoverServer serves this instance's state to the others.
type handoverServer struct {
	mu      sync.Mutex
	st      InstanceState
	changed chan struct{} // closed and replaced at each change
}

func newHandoverServer(st InstanceState) *handoverServer {
	return &handoverServer{st: st, changed: make(chan struct{})}
}

// update changes the state and wakes every watcher.
func (h *handoverServer) update(f func(*InstanceState)) InstanceState {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.st)
	close(h.changed)
	h.changed = make(chan struct{})
	return h.st
}

func (h *handoverServer) get() (InstanceState, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st, h.changed
}

// watcher is what grpc.ServiceDesc needs as the handler type.
type watcher interface {
	watch(stream grpc.ServerStream) error
}

var handoverDesc = grpc.ServiceDesc{
	ServiceName: handoverService,
	HandlerType: (*watcher)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
				return err
			}
			return srv.(watcher).watch(stream)
		},
	}},
	Metadata: "handover",
}

// socketHandover serves the handover service on one socket: its streams
// end as soon as that socket is stopped (closing), so that stopping it never
// waits on a watcher.
type socketHandover struct {
	h       *handoverServer
	closing chan struct{}
}

// watch sends the state now and at each change, until the client leaves or
// the socket is stopped.
func (s *socketHandover) watch(stream grpc.ServerStream) error {
	h := s.h
	send := func(st InstanceState) error {
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		return stream.SendMsg(wrapperspb.Bytes(b))
	}
	for {
		st, changed := h.get()
		if err := send(st); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		case <-s.closing:
			// The last change before the socket stops (e.g. Withdrawn)
			// still goes out.
			if last, _ := h.get(); !reflect.DeepEqual(last, st) {
				return send(last)
			}
			return nil
		}
	}
}

// peerEvent is what watching another instance's socket comes back with: a
// state, or the end of the stream (gone).
type peerEvent struct {
	path string
	st   InstanceState
	gone bool
	err  error
}

// watchPeer streams the state of the instance serving path into events
// until ctx ends or the stream does; the last event has gone set. A socket
// is created a moment before it listens: the Watch call waits for the
// connection (gRPC's own reconnect backoff) until the first state arrives,
// for up to firstStateWait on clk; a socket that does not answer by then
// (a dead instance's) is gone.
func watchPeer(ctx context.Context, clk clock, path string, events chan<- peerEvent) {
	send := func(ev peerEvent) {
		select {
		case events <- ev:
		case <-ctx.Done():
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got atomic.Bool
	first := clk.NewTimer(firstStateWait)
	defer first.Stop()
	go func() { // ends with sctx, which this function ends
		select {
		case <-first.C():
			if !got.Load() {
				cancel()
			}
		case <-sctx.Done():
		}
	}()
	_, err := streamStates(sctx, path, func(st InstanceState) {
		got.Store(true)
		send(peerEvent{path: path, st: st})
	}, grpc.WaitForReady(true))
	send(peerEvent{path: path, gone: true, err: err})
}

// firstStateWait bounds how long watchPeer waits for a socket's first state.
const firstStateWait = 2 * time.Second

// streamStates passes each state the instance at path sends to f, until
// the stream ends; got reports whether any state arrived.
func streamStates(ctx context.Context, path string, f func(InstanceState), opts ...grpc.CallOption) (got bool, err error) {
	conn, err := csiplugin.Dial(path, grpc.WithUserAgent(csiplugin.NotKubeletUserAgent+" (rolling update)"))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stream, err := openWatch(ctx, conn, opts...)
	if err != nil {
		return false, err
	}
	for {
		st, err := recvState(stream)
		if err != nil {
			return got, err
		}
		got = true
		f(st)
	}
}

// openWatch starts a Watch call on conn.
func openWatch(ctx context.Context, conn *grpc.ClientConn, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	stream, err := conn.NewStream(ctx, &handoverDesc.Streams[0], handoverWatch, opts...)
	if err != nil {
		return nil, err
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		return nil, err
	}
	return stream, stream.CloseSend()
}

// recvState receives the next state of a Watch call.
func recvState(stream grpc.ClientStream) (InstanceState, error) {
	var msg wrapperspb.BytesValue
	if err := stream.RecvMsg(&msg); err != nil {
		return InstanceState{}, err
	}
	var st InstanceState
	err := json.Unmarshal(msg.GetValue(), &st)
	return st, err
}
