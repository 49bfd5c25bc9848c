package registrar

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The client of the previous release's rolling-update mode (before the
// handover), kept for the upgrade from it: each instance of that mode
// serves, beside the Registration service of each of its announcement
// sockets, a second gRPC service that streams its state; csi-registrar
// doctor reads it to say which instance holds the registration while such
// a pod still runs. This release serves it no more.
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
	// DriverDown: the instance's driver stopped answering Probe (or says
	// not ready) after it was ready, and has not been ready for the stable
	// window since: the instance does not claim the registration while
	// another may hold it, and an older instance takes it back.
	DriverDown bool `json:"driverDown,omitempty"`
}

// NewerThan reports whether s should hold the registration rather than o.
func (s InstanceState) NewerThan(o InstanceState) bool {
	if s.Birth != o.Birth {
		return s.Birth > o.Birth
	}
	return s.Instance > o.Instance
}

// FetchInstanceState asks the previous release's rolling-update instance
// serving the announcement socket at path for its state, once, within ctx: a node tool
// (csi-registrar doctor) reading who holds a driver's registration. Its
// error is an *InstanceStateError.
func FetchInstanceState(ctx context.Context, path string) (InstanceState, error) {
	st, err := fetchState(ctx, path)
	if err != nil {
		return InstanceState{}, &InstanceStateError{Path: path, Err: err}
	}
	return st, nil
}

// fetchState reads the first state the instance at path sends.
func fetchState(ctx context.Context, path string) (InstanceState, error) {
	conn, err := csiplugin.Dial(path, grpc.WithUserAgent(csiplugin.NotKubeletUserAgent+" (rolling update)"))
	if err != nil {
		return InstanceState{}, err
	}
	defer conn.Close()
	stream, err := openWatch(ctx, conn)
	if err != nil {
		return InstanceState{}, err
	}
	return recvState(stream)
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

// openWatch starts a Watch call on conn.
func openWatch(ctx context.Context, conn *grpc.ClientConn, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}, handoverWatch, opts...)
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
