package registrar

import (
	"sync"
	"time"
)

// Stage is where the registrar is in its lifecycle. The control loop's
// transitions between stages are the table in transitions_test.go (shown in docs/design.md).
type Stage int

const (
	// StageStarting: options checked, nothing done yet.
	StageStarting Stage = iota
	// StageWaitingForDriver: the driver socket is absent or does not answer.
	StageWaitingForDriver
	// StageSocketConflict: another live process serves a socket at the
	// registration path; it is left alone and the path is retried with backoff.
	StageSocketConflict
	// StageSocketNotASocket: a file that is not a socket (regular file,
	// directory, symbolic link …) is at the registration path; left alone, retried.
	StageSocketNotASocket
	// StageSocketPermissionDenied: this process may not create the socket in
	// the registration directory; retried.
	StageSocketPermissionDenied
	// StageSocketDirectoryMissing: the registration directory does not exist
	// (the kubelet's plugins_registry is not mounted there); retried.
	StageSocketDirectoryMissing
	// StageSocketError: the socket could not be created for another reason; retried.
	StageSocketError
	// StageWaitingForKubelet: the registration socket is served, the kubelet
	// has not confirmed registration yet.
	StageWaitingForKubelet
	// StageRejected: the kubelet reported a failed registration; the socket is
	// re-created after a backoff so that the kubelet tries again, or kept when
	// the kubelet retries by itself.
	StageRejected
	// StageRegistered: the kubelet confirmed registration on the current socket.
	StageRegistered
	// StageStopped: Run has returned.
	StageStopped
	// StageStandingBy: with RollingUpdate (the handover) only. Another
	// registrar of the driver on this node holds the registration (one
	// without the handover, which it takes over from when that one leaves,
	// or one that replaced its socket); this one serves none.
	StageStandingBy
)

var allStages = []Stage{StageStarting, StageWaitingForDriver, StageSocketConflict, StageSocketNotASocket,
	StageSocketPermissionDenied, StageSocketDirectoryMissing, StageSocketError, StageWaitingForKubelet,
	StageRejected, StageRegistered, StageStopped, StageStandingBy}

func (s Stage) String() string {
	switch s {
	case StageStarting:
		return "starting"
	case StageWaitingForDriver:
		return "waiting for driver"
	case StageSocketConflict:
		return "socket conflict"
	case StageSocketNotASocket:
		return "socket path is not a socket"
	case StageSocketPermissionDenied:
		return "socket permission denied"
	case StageSocketDirectoryMissing:
		return "registration directory missing"
	case StageSocketError:
		return "socket error"
	case StageWaitingForKubelet:
		return "waiting for kubelet"
	case StageRejected:
		return "kubelet rejected"
	case StageRegistered:
		return "registered"
	case StageStopped:
		return "stopped"
	case StageStandingBy:
		return "standing by"
	}
	return "unknown"
}

// KubeletRetry is what the registrar inferred about the kubelet's handling of
// a failed registration, from what the kubelet did on the socket. Kubelets
// before 1.36 never retry; from 1.36 (kubernetes/kubernetes PR #133335) the
// kubelet retries GetInfo on the same socket with a backoff of its own.
type KubeletRetry int

const (
	// KubeletRetryUnknown: no rejection observed yet.
	KubeletRetryUnknown KubeletRetry = iota
	// KubeletRetryNever: after a rejection the kubelet did not call GetInfo
	// again before the registrar re-created its socket (kubelet < 1.36).
	KubeletRetryNever
	// KubeletRetryItself: after a rejection the kubelet called GetInfo again
	// on the same socket (kubelet ≥ 1.36). Kept for the life of the process.
	KubeletRetryItself
)

var allKubeletRetries = []KubeletRetry{KubeletRetryUnknown, KubeletRetryNever, KubeletRetryItself}

func (k KubeletRetry) String() string {
	switch k {
	case KubeletRetryNever:
		return "never"
	case KubeletRetryItself:
		return "itself"
	}
	return "unknown"
}

// Status is a snapshot of the registrar's state.
type Status struct {
	Stage      Stage
	Detail     string // the kubelet's error, the conflict, what is awaited
	DriverName string
	SocketPath string
	Since      time.Time // when Stage was entered
	// KubeletRetry is what the registrar inferred about the kubelet's own
	// retries; it decides whether a rejection re-creates the socket.
	KubeletRetry KubeletRetry
	// Fallback, at StageStandingBy only (the handover): another registrar
	// (node-driver-registrar, a registrar without RollingUpdate, the
	// previous release's rolling-update mode) holds the registration and
	// this instance's driver answers Probe, so it takes the registration
	// over when that registrar leaves. /readyz answers 200 then while the
	// driver answers Probe: the DaemonSet controller deletes the old pod
	// only once the new one is Ready.
	Fallback bool
}

// String is the one-line form /readyz prints, e.g. "kubelet rejected: <error>",
// "standing by (ready to take the registration back): <why>".
func (s Status) String() string {
	stage := s.Stage.String()
	if s.Stage == StageStandingBy && s.Fallback {
		stage += " (ready to take the registration back)"
	}
	if s.Detail == "" {
		return stage
	}
	return stage + ": " + s.Detail
}

// statusBox holds the current Status for readers on other goroutines.
type statusBox struct {
	mu      sync.Mutex
	st      Status
	changed chan struct{} // closed and replaced at each update; nil until watched
	publish func(Status)  // receives each update under mu; nil: none (statefile.go)
}

func (b *statusBox) get() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}

func (b *statusBox) update(f func(*Status)) Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.st)
	if b.publish != nil {
		b.publish(b.st)
	}
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.st
}

// watch returns the Status and a channel closed at its next update.
func (b *statusBox) watch() (Status, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.st, b.changed
}
