package registrar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// reconcile looks at what events would have reported and handles any
// mismatch exactly as the missed event: our socket gone or replaced
// (socketLost), our socket no longer served (a new socket), the driver
// socket replaced (a restart: ask the name again), the driver not answering
// Probe or answering again.
//
// "Served" is checked in the process (our gRPC server still runs on our
// listener, whose file is still at the path) on the tick, and also through
// the socket, with a GetInfo of our own (selfCheck), when deep: after a file
// watcher error, when events were certainly lost. A GetInfo over a new
// connection costs about 12 context switches, more than twice the wakeup
// itself: on every tick it would break the idle wakeup budget (see
// reconcilePeriod).
func (l *loop) reconcile(ctx context.Context, why string, deep bool) {
	l.log.Debug("reconciling", "why", why, "deep", deep)
	if l.sock.cur != nil {
		if !l.sock.cur.sock.Owned() {
			l.log.Warn("reconcile: the registration socket is not ours any more; an event was missed", "why", why)
			l.socketLost()
		} else if err := l.served(ctx, deep); err != nil {
			l.log.Error("registration socket does not answer GetInfo; re-creating it", "err", err, "outcome", "recreating")
			l.create(reasonUnresponsive)
		}
	}
	if l.alarms.recheck.armed() || l.driver.asking {
		return // a look at the driver is under way
	}
	if id, err := csiplugin.FileIDOf(l.r.driverPath); err == nil && id != l.driver.id {
		l.driverRestarted("reconcile (" + why + ")")
		return
	}
	l.ask(ctx, false) // Probe: a failure is an outage, an answer after one a recheck
}

// served reports whether our registration server still serves its socket:
// its Serve loop runs and, when deep, a GetInfo through the socket answers.
func (l *loop) served(ctx context.Context, deep bool) error {
	select {
	case <-l.sock.cur.serving.Done():
		return errors.New("the gRPC server on the registration socket stopped")
	default:
	}
	if !deep {
		return nil
	}
	return selfCheck(ctx, l.sock.path, l.driver.name, l.r.opts.Timeout)
}

// selfCheck calls GetInfo on our own socket and checks the name.
func selfCheck(ctx context.Context, path, name string, timeout time.Duration) error {
	conn, err := csiplugin.Dial(path, grpc.WithUserAgent(csiplugin.NotKubeletUserAgent+" (reconcile)"))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo on %s: %w", path, err)
	}
	if info.GetName() != name {
		return fmt.Errorf("GetInfo on %s answered the name %q, want %q", path, info.GetName(), name)
	}
	return nil
}
