package registrar

import (
	"sync"
	"time"
)

// Stage is where the registrar is in its lifecycle.
type Stage int

const (
	// StageStarting: options checked, nothing done yet.
	StageStarting Stage = iota
	// StageWaitingForDriver: the driver socket is absent or does not answer.
	StageWaitingForDriver
	// StageSocketConflict: the registration socket path is taken by something
	// this process must not remove; it retries with backoff.
	StageSocketConflict
	// StageWaitingForKubelet: the registration socket is served, the kubelet
	// has not confirmed registration yet.
	StageWaitingForKubelet
	// StageRejected: the kubelet reported a failed registration; the socket is
	// re-created after a backoff so that the kubelet tries again.
	StageRejected
	// StageRegistered: the kubelet confirmed registration on the current socket.
	StageRegistered
)

var allStages = []Stage{StageStarting, StageWaitingForDriver, StageSocketConflict, StageWaitingForKubelet, StageRejected, StageRegistered}

func (s Stage) String() string {
	switch s {
	case StageStarting:
		return "starting"
	case StageWaitingForDriver:
		return "waiting for driver"
	case StageSocketConflict:
		return "socket conflict"
	case StageWaitingForKubelet:
		return "waiting for kubelet"
	case StageRejected:
		return "kubelet rejected"
	case StageRegistered:
		return "registered"
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
}

// String is the one-line form /readyz prints, e.g. "kubelet rejected: <error>".
func (s Status) String() string {
	if s.Detail == "" {
		return s.Stage.String()
	}
	return s.Stage.String() + ": " + s.Detail
}

// statusBox holds the current Status for readers on other goroutines.
type statusBox struct {
	mu sync.Mutex
	st Status
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
	return b.st
}
