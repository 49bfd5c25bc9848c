package registrar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// The control loop's handlers of the driver's events: its socket, its
// answers, the wait for it. One handler per event (the registration
// socket's and the kubelet's are in socketevents.go); a handler that returns
// an error ends Run with it.

// waiting reports whether the loop still waits for the driver's first answer.
func (l *loop) waiting() bool { return l.driver.name == "" }

// lookAtDriver is due (start, a file event, a backoff, a lost event): while
// waiting, look at the driver socket and ask the driver once it is one;
// afterwards ask the driver its name again.
func (l *loop) lookAtDriver(ctx context.Context) error {
	if !l.waiting() {
		l.ask(ctx, true)
		return nil
	}
	path := l.r.driverPath
	l.log.Debug("looking at the driver socket", "socket", path)
	st, err := os.Stat(path)
	switch {
	case err == nil && st.Mode().Type() == fs.ModeSocket:
		l.ask(ctx, true)
		return nil
	case err == nil:
		return &OptionError{Option: OptionCSIAddress, Value: path, Op: "connect to",
			Err: errors.New("it is a " + sockfile.FileKind(st.Mode()) + ", not a socket"), Fix: "point it at the socket the CSI driver listens on"}
	case errors.Is(err, fs.ErrNotExist):
		l.driverMissing(errors.New("socket does not exist yet"), reconcilePeriod)
		return nil
	}
	return &OptionError{Option: OptionCSIAddress, Value: path, Op: "inspect", Err: err}
}

// driverMissing records, while waiting, why the driver did not answer, and
// when to look again (a file event may come first).
func (l *loop) driverMissing(err error, again time.Duration) {
	l.driver.lastErr = err
	l.r.metrics.setReachable(false)
	l.alarms.recheck.set(again)
	l.publish(StageWaitingForDriver, err.Error())
}

// onDriverAnswer: a call to the driver returned.
func (l *loop) onDriverAnswer(ctx context.Context, a driverAnswer) error {
	l.driver.asking = false
	if l.driver.askAgain {
		l.driver.askAgain = false
		defer l.ask(ctx, true)
	} else if l.driver.probeAgain {
		l.driver.probeAgain = false
		defer l.ask(ctx, false)
	}
	switch {
	case a.named && csiplugin.IsValidationError(a.err):
		return a.err
	case a.named && l.waiting():
		return l.onFirstAnswer(a)
	case a.named:
		return l.onNameAgain(a)
	case a.err != nil:
		l.driverDown(a.err)
	case !l.driver.up:
		l.ask(ctx, true) // back: maybe under another name
	}
	return nil
}

// onFirstAnswer: the driver answered (or failed to) while awaited.
func (l *loop) onFirstAnswer(a driverAnswer) error {
	if a.err != nil {
		if !retryable(a.err) {
			return a.err
		}
		l.driverMissing(a.err, l.driverBackoff().next())
		return nil
	}
	l.r.metrics.setReachable(true)
	l.log.Info("driver answered", "driver", a.name, "socket", l.r.driverPath, "outcome", "answered",
		"waited", l.r.clock.Now().Sub(l.driver.waitStart).Round(time.Millisecond))
	l.alarms.progress.stop()
	l.alarms.deadline.stop()
	if err := l.watcher.Add(l.r.opts.PluginRegistrationPath); err != nil {
		return &OptionError{Option: OptionPluginRegistrationPath, Value: l.r.opts.PluginRegistrationPath, Op: "watch",
			Err: err, Fix: "mount the kubelet's plugins_registry there"}
	}
	l.begin(a.name, a.path)
	return nil
}

// onNameAgain: the driver, asked again after a restart or an outage, named
// itself: the same name keeps the registration, another one replaces it.
func (l *loop) onNameAgain(a driverAnswer) error {
	if a.err != nil {
		l.driverDown(a.err)
		d := l.driverBackoff().next()
		l.alarms.recheck.set(d)
		l.log.Info("driver not answering after it came back", "err", a.err, "retryIn", d, "outcome", "rechecking")
		return nil
	}
	l.driverBackoff().reset()
	l.driver.id, _ = csiplugin.FileIDOf(l.r.driverPath)
	l.driverBack()
	if a.name == l.driver.name {
		l.log.Info("driver came back under the same name", "outcome", "unchanged")
		return nil
	}
	l.log.Info("driver came back under another name; registering it instead", "newDriver", a.name, "outcome", "renamed")
	l.begin(a.name, a.path)
	return nil
}

// begin registers the driver under name, at path (both validated by
// identify): it ends the registration of any earlier name, then serves the
// new socket.
func (l *loop) begin(name, path string) {
	if l.sock.cur != nil {
		l.closeSocket("exit")
	}
	l.stopSessionAlarms()
	l.r.status.update(func(st *Status) { st.DriverName, st.SocketPath = name, path })
	l.driver.name, l.sock.path = name, path
	l.log = l.r.log.With("driver", name, "socket", path)
	l.driver.up = true
	l.driver.id, _ = csiplugin.FileIDOf(l.r.driverPath)
	l.sock.backoff.reset()
	l.driver.recheckBackoff.reset()
	l.alarms.tick.set(reconcilePeriod)
	l.create(reasonStart)
}

// onStillWaiting: the progress alarm, while the driver is awaited.
func (l *loop) onStillWaiting() {
	l.alarms.progress.set(driverProgressEvery)
	l.log.Info("still waiting for the CSI driver", "waited", l.r.clock.Now().Sub(l.driver.waitStart).Round(time.Second),
		"lastError", fmt.Sprint(l.driver.lastErr), "check", "is the driver container running and listening on this socket?")
}

// onConnectionTimeout: Options.ConnectionTimeout passed without an answer.
func (l *loop) onConnectionTimeout() error {
	return &OptionError{Option: OptionConnectionTimeout, Value: l.r.opts.ConnectionTimeout.String(),
		Err: &DriverTimeoutError{Address: l.r.driverPath, Waited: l.r.clock.Now().Sub(l.driver.waitStart).Round(time.Millisecond), Err: l.driver.lastErr},
		Fix: "check that the driver's container runs and listens there, or allow a longer wait"}
}

// onWatcherError: events were lost (e.g. an inotify queue overflow).
func (l *loop) onWatcherError(ctx context.Context, err error) error {
	if l.waiting() {
		l.log.Warn("file watcher error; looking at the driver socket again", "err", err, "socket", l.r.driverPath, "outcome", "rechecking")
		return l.lookAtDriver(ctx)
	}
	l.log.Warn("file watcher error; reconciling now", "err", err, "outcome", "reconciling")
	l.reconcile(ctx, "watcher error", true)
	return nil
}

// onDriverSocketEvent: the driver's socket was created (a restart: ask its
// name again) or removed (it stopped).
func (l *loop) onDriverSocketEvent(ctx context.Context, ev fsnotify.Event) error {
	if l.waiting() {
		l.driver.reconnectNow = true
		return l.lookAtDriver(ctx)
	}
	switch {
	case ev.Has(fsnotify.Create):
		l.driverRestarted("file event")
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		l.driverDown(errors.New("its socket was removed"))
	}
	return nil
}

// driverRestarted: the driver socket is a new one, whoever noticed (a file
// event, or the reconcile that stands in for a lost one): reconnect and ask
// the driver its name at once.
func (l *loop) driverRestarted(noticedBy string) {
	l.driver.reconnectNow = true
	l.driverBackoff().reset()
	l.alarms.recheck.set(0)
	l.log.Info("driver socket created again; the driver restarted", "noticedBy", noticedBy, "outcome", "rechecking")
}

// driverDown records and logs (once per outage) that the driver stopped answering.
func (l *loop) driverDown(err error) {
	l.r.metrics.setReachable(false)
	if !l.driver.up {
		return
	}
	l.driver.up = false
	l.log.Warn("driver stopped answering", "err", err, "outcome", "unreachable",
		"check", "is the driver container running? /readyz is 503 until it answers Probe again")
}

// driverBack records and logs (once per outage) that the driver answers again.
func (l *loop) driverBack() {
	l.r.metrics.setReachable(true)
	if l.driver.up {
		return
	}
	l.driver.up = true
	l.log.Info("driver answers again", "outcome", "reachable")
}
