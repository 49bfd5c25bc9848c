package registrar

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The control loop, in the manner of the kubelet's plugin manager: the
// desired state is "the kubelet confirmed <name>-reg.sock, which this
// process serves, and the driver answers"; the actual state is the loop
// struct below, owned by the one goroutine that runs it from start to stop
// (waiting for the driver is a stage of it, not a loop of its own). Every
// event is one short handler (driverevents.go, socketevents.go) that compares the two and takes
// the next step. Calls to the driver run beside the loop and come back as
// events (driverAnswer), so the loop, and /healthz, which the loop answers,
// never wait for the driver; the kubelet's calls arrive through the
// registration server's signal. A reconcile tick (reconcile.go) looks again
// at what an event would have told, so that a lost event costs at most one
// period. The transitions are the table in transitions_test.go, which the tests
// run and docs/design.md shows. With Options.RollingUpdate the handover
// (handover_loop.go) runs instead of this loop.
const (
	// reconcilePeriod is how often the loop looks at its socket and the
	// driver without an event. It bounds how long a lost file event (an
	// inotify queue overflow, which is also reported and reconciled at once)
	// leaves the stage wrong, and how late a driver that hangs without
	// exiting is logged (/readyz probes the driver itself on every request).
	//
	// The period is set by the idle budget of 0.1 context switches/s (make
	// bench, figure 6b). Measured with the tick at 1 s (voluntary switches,
	// all threads, 20 s, 2 cores under load): a wakeup that does nothing
	// costs about 5 (the timer's thread, the runtime waking a second P); the
	// tick below (two stats and a Probe on the open driver connection) about
	// 15; a GetInfo on our own socket over a new connection about 12 more.
	// The runtime's forced GC every 2 min already spends 0.033/s. This tick
	// every 5 min adds 0.05/s; every 30 s it would add 0.5/s, five times
	// the whole budget.
	reconcilePeriod = 5 * time.Minute

	// kubeletRetrySilence is how long a kubelet that retries by itself
	// (≥ 1.36) may stay silent after a rejection before the socket is
	// re-created anyway: its backoff doubles from 500 ms to 2m2s
	// (pkg/util/goroutinemap/exponentialbackoff), plus 28 s of margin for its
	// 1 s reconciler loop, the GetInfo deadline and a busy node.
	kubeletRetrySilence = 2*time.Minute + 30*time.Second

	// kubeletRetryProbe is the least time the socket is kept after a
	// rejection while it is not known whether the kubelet retries by itself,
	// so that a kubelet that does is seen doing it before the socket is
	// re-created. Measured with make bench-retry (kubelet 1.36.4 and 1.37.2
	// logs): the kubelet's first retry comes after its backoff of 500 ms plus
	// up to one 1 s reconciler period, 0.6 s to 1.6 s after the Notify(false);
	// the backoff's first step (1 s) would often come first, so that such a
	// kubelet was taken for one that never retries.
	kubeletRetryProbe = 3 * time.Second

	// driverProgressEvery is how often a log line says the loop still waits
	// for the driver; waking is event-driven.
	driverProgressEvery = 10 * time.Second
)

// Reasons of a socket creation (csi_registrar_socket_creations_total{reason});
// a listen fault adds its own (sockfile.Kind).
const (
	reasonStart         = "start"
	reasonDeleted       = "deleted"
	reasonRejected      = "rejected"
	reasonKubeletSilent = "kubelet-silent" // no GetInfo on a new socket, or a retrying kubelet gone quiet
	reasonNoNotify      = "no-notify"      // GetInfo answered, no NotifyRegistrationStatus within KubeletWait
	reasonUnresponsive  = "unresponsive"   // our socket did not answer GetInfo at a reconcile
	reasonOtherRemoved  = "other-removed"  // an announcement of the previous release's mode for this driver was unlinked by name
)

// awaiting is the kubelet's next step, whose absence the kubelet alarm catches.
type awaiting int

const (
	awaitNothing awaiting = iota
	awaitGetInfo          // a new socket: the kubelet's first GetInfo
	awaitNotify           // GetInfo answered: the kubelet's NotifyRegistrationStatus
	awaitRetry            // a kubelet that retries by itself, after a rejection: its next GetInfo
)

// driverAnswer is the event a call to the driver, run beside the loop,
// comes back with.
type driverAnswer struct {
	named bool   // the call asked the name (identify); else it was a Probe
	name  string // the name to register, when named and err is nil
	path  string // its registration socket (validated with the name)
	err   error
}

// loop is the control loop's whole state, grouped by what it describes.
// Only the goroutine in run reads or writes it; the world sees it through
// the published Status and the metrics, which it writes and never reads back.
type loop struct {
	r       *Registrar
	drv     *driverClient
	watcher *fsnotify.Watcher
	log     *slog.Logger // with the driver and socket once they are known
	answers chan driverAnswer

	// stage is what the loop is doing; publish writes it and Status.Stage.
	stage Stage
	// kubeletRetry is what the kubelet's behaviour showed; "itself" is kept
	// for the life of the process.
	kubeletRetry KubeletRetry

	driver driverState
	sock   socketState
	alarms alarms
}

// driverState is what the loop knows of the driver. name is "" until it
// answered: the loop waits for it.
type driverState struct {
	name      string           // the driver name registered
	up        bool             // the driver answered at the last look (logged once per outage)
	id        csiplugin.FileID // the driver socket the driver answered on
	lastErr   error            // why the driver did not answer, while waiting for it
	waitStart time.Time        // when the wait for the driver began (for logs and the timeout's error)
	asking    bool             // a call to the driver is under way
	askAgain  bool             // ask the name again when it returns
	// probeAgain: ask Probe when it returns (a Probe asked for while a call
	// is under way is not lost).
	probeAgain bool
	// reconnectNow: the driver socket is a new one; the next call first
	// resets the client's reconnect backoff (in the calling goroutine: gRPC's
	// ResetConnectBackoff must not run beside a call that connects).
	reconnectNow bool
	// The backoffs between looks at a driver that does not answer, one per
	// stage: waitBackoff while it is awaited (a socket that is not served
	// yet: look again soon), recheckBackoff once it answered and then
	// failed (a restart in progress: do not hammer it).
	waitBackoff, recheckBackoff *backoff
}

// socketState is the registration socket and the kubelet's progress on it.
type socketState struct {
	path     string                          // <dir>/<name>-reg.sock
	cur      *servingSocket                  // nil while the path cannot be served
	getInfos int                             // GetInfo calls on cur already handled
	handled  *registerapi.RegistrationStatus // last Notify on cur acted on
	awaiting awaiting                        // the kubelet's next step
	backoff  *backoff                        // between socket re-creations
	reason   string                          // of the re-creation alarms.retryAt triggers
}

// alarms are the loop's timers.
type alarms struct {
	retryAt  alarm // re-create the socket
	kubelet  alarm // the kubelet's next step is overdue
	recheck  alarm // look at the driver (ask its name) again
	tick     alarm // reconcile
	progress alarm // log that the driver is still awaited
	deadline alarm // Options.ConnectionTimeout while the driver is awaited
}

func (r *Registrar) newLoop(drv *driverClient, watcher *fsnotify.Watcher) *loop {
	clk := r.clock
	return &loop{
		r: r, drv: drv, watcher: watcher, log: r.log,
		answers: make(chan driverAnswer, 1),
		driver: driverState{
			waitBackoff:    newBackoff(10*time.Millisecond, time.Second),
			recheckBackoff: newBackoff(100*time.Millisecond, 10*time.Second),
		},
		sock: socketState{backoff: newBackoff(time.Second, r.opts.RegistrationRetryMax)},
		alarms: alarms{
			retryAt: newAlarm(clk), kubelet: newAlarm(clk), recheck: newAlarm(clk),
			tick: newAlarm(clk), progress: newAlarm(clk), deadline: newAlarm(clk),
		},
	}
}

// driverBackoff is the backoff of the stage the loop is in.
func (l *loop) driverBackoff() *backoff {
	if l.waiting() {
		return l.driver.waitBackoff
	}
	return l.driver.recheckBackoff
}

// run is the control loop, from start to stop: it returns nil when ctx
// ends, or the error that ends Run.
func (l *loop) run(ctx context.Context) error {
	defer l.shutdown()
	ctx, cancel := context.WithCancel(ctx) // ends a call to the driver under way at shutdown
	defer cancel()
	l.driver.waitStart = l.r.clock.Now()
	l.publish(StageWaitingForDriver, "connecting to "+l.r.driverPath)
	if l.r.opts.ConnectionTimeout > 0 {
		l.alarms.deadline.set(l.r.opts.ConnectionTimeout)
	}
	l.alarms.progress.set(driverProgressEvery)
	if err := l.lookAtDriver(ctx); err != nil {
		return err
	}
	files, watchErrs := l.watcher.Events, l.watcher.Errors
	for {
		var signal <-chan struct{}
		if l.sock.cur != nil {
			signal = l.sock.cur.server.signal
		}
		var err error
		select {
		case <-ctx.Done():
			return nil
		case reply := <-l.r.ping:
			close(reply)
		case req := <-l.r.reregister:
			l.onReregister(req)
		case a := <-l.answers:
			err = l.onDriverAnswer(ctx, a)
		case <-signal:
			l.onRegistrationSignal()
		case <-l.alarms.retryAt.c():
			l.alarms.retryAt.stop()
			l.onRetryDue()
		case <-l.alarms.kubelet.c():
			l.alarms.kubelet.stop()
			l.onKubeletSilent()
		case <-l.alarms.recheck.c():
			l.alarms.recheck.stop()
			err = l.lookAtDriver(ctx)
		case <-l.alarms.tick.c():
			l.alarms.tick.set(reconcilePeriod)
			l.reconcile(ctx, "tick", false)
		case <-l.alarms.progress.c():
			l.onStillWaiting()
		case <-l.alarms.deadline.c():
			err = l.onConnectionTimeout()
		case werr, ok := <-watchErrs:
			if !ok {
				err = errors.New("file watcher closed")
			} else {
				err = l.onWatcherError(ctx, werr)
			}
		case ev, ok := <-files:
			if !ok {
				err = errors.New("file watcher closed")
				break
			}
			switch name := filepath.Clean(ev.Name); {
			case name == l.r.driverPath:
				err = l.onDriverSocketEvent(ctx, ev)
			case name == l.sock.path:
				l.onRegistrationSocketEvent(ev)
			case filepath.Dir(name) == filepath.Dir(l.sock.path):
				l.onDirEvent(filepath.Base(name), ev)
			}
		}
		if err != nil {
			return err
		}
	}
}

// publish enters stage and publishes it. Every transition arms its timers
// (and logs) first, so whoever sees the stage sees the timers that go with it.
func (l *loop) publish(stage Stage, detail string) {
	now := l.r.clock.Now()
	l.r.status.update(func(st *Status) {
		if st.Stage != stage {
			st.Since = now
		}
		st.Stage, st.Detail = stage, detail
	})
	l.stage = stage
}

// ask calls the driver beside the loop: its name (identify) when named,
// else Probe. The answer comes back as a driverAnswer event. One call runs
// at a time; a name asked for meanwhile is asked when it returns.
func (l *loop) ask(ctx context.Context, named bool) {
	if l.driver.asking {
		l.driver.askAgain = l.driver.askAgain || named
		l.driver.probeAgain = l.driver.probeAgain || !named
		return
	}
	l.driver.asking = true
	reconnect := l.driver.reconnectNow
	l.driver.reconnectNow = false
	go func() {
		if reconnect {
			l.drv.ResetBackoff()
		}
		a := driverAnswer{named: named}
		if named {
			a.name, a.path, a.err = l.r.identify(ctx, l.drv)
		} else {
			a.err = l.drv.Probe(ctx)
		}
		l.answers <- a // buffered: the one call under way never blocks
	}()
}

// shutdown stops every timer and the socket (removing it if it still is
// ours), and waits for a call to the driver under way (ctx has ended it).
func (l *loop) shutdown() {
	l.stopSessionAlarms()
	l.alarms.progress.stop()
	l.alarms.deadline.stop()
	if l.sock.cur != nil {
		l.closeSocket("exit")
	}
	if l.driver.asking {
		<-l.answers
		l.driver.asking = false
	}
}

func (l *loop) stopSessionAlarms() {
	l.alarms.retryAt.stop()
	l.alarms.kubelet.stop()
	l.alarms.recheck.stop()
	l.alarms.tick.stop()
}

// short formats d for people: 2m rather than 2m0s, 1h rather than 1h0m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
