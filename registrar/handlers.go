package registrar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/sockfile"
)

// One handler per event of the control loop (loop.go). A handler that
// returns an error ends Run with it.

// waiting reports whether the loop still waits for the driver's first answer.
func (l *loop) waiting() bool { return l.name == "" }

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
		return optionFailed(OptionCSIAddress, "%[1]s "+path+" is a %[2]v, not a socket: point %[1]s at the socket the CSI driver listens on",
			errors.New(sockfile.FileKind(st.Mode())))
	case errors.Is(err, fs.ErrNotExist):
		l.driverMissing(errors.New("socket does not exist yet"), reconcilePeriod)
		return nil
	}
	return optionFailed(OptionCSIAddress, "inspect %[1]s "+path+": %[2]v", err)
}

// driverMissing records, while waiting, why the driver did not answer, and
// when to look again (a file event may come first).
func (l *loop) driverMissing(err error, again time.Duration) {
	l.lastErr = err
	l.r.metrics.setReachable(false)
	l.recheck.set(again)
	l.publish(StageWaitingForDriver, err.Error())
}

// onDriverAnswer: a call to the driver returned.
func (l *loop) onDriverAnswer(ctx context.Context, a driverAnswer) error {
	l.asking = false
	if l.askAgain {
		l.askAgain = false
		defer l.ask(ctx, true)
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
	case !l.driverUp:
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
		l.driverMissing(a.err, l.driverRetry.next())
		return nil
	}
	l.r.metrics.setReachable(true)
	l.log.Info("driver answered", "driver", a.name, "socket", l.r.driverPath, "outcome", "answered",
		"waited", l.r.clock.Now().Sub(l.waitStart).Round(time.Millisecond))
	l.progress.stop()
	l.deadline.stop()
	if err := l.watcher.Add(l.r.opts.PluginRegistrationPath); err != nil {
		return optionFailed(OptionPluginRegistrationPath, "watch %[1]s "+l.r.opts.PluginRegistrationPath+
			": %[2]v; mount the kubelet's plugins_registry there", err)
	}
	return l.begin(a.name)
}

// onNameAgain: the driver, asked again after a restart or an outage, named
// itself: the same name keeps the registration, another one replaces it.
func (l *loop) onNameAgain(a driverAnswer) error {
	if a.err != nil {
		l.driverDown(a.err)
		d := l.driverRetry.next()
		l.recheck.set(d)
		l.log.Info("driver not answering after it came back", "err", a.err, "retryIn", d, "outcome", "rechecking")
		return nil
	}
	l.driverRetry.reset()
	l.driverID, _ = csiplugin.FileIDOf(l.r.driverPath)
	l.driverBack()
	if a.name == l.name {
		l.log.Info("driver came back under the same name", "outcome", "unchanged")
		return nil
	}
	l.log.Info("driver came back under another name; registering it instead", "newDriver", a.name, "outcome", "renamed")
	return l.begin(a.name)
}

// begin registers the driver under name: it ends the registration of any
// earlier name, then serves the new socket.
func (l *loop) begin(name string) error {
	if l.cur != nil {
		l.closeSocket("exit")
	}
	l.stopSessionAlarms()
	path, err := csiplugin.RegistrationSocketPath(l.r.opts.PluginRegistrationPath, name)
	if err != nil {
		return err
	}
	l.r.status.update(func(st *Status) { st.DriverName, st.SocketPath = name, path })
	l.name, l.path = name, path
	l.log = l.r.log.With("driver", name, "socket", path)
	l.driverUp = true
	l.driverID, _ = csiplugin.FileIDOf(l.r.driverPath)
	l.retry = newBackoff(time.Second, l.r.opts.RegistrationRetryMax)
	l.driverRetry = newBackoff(100*time.Millisecond, 10*time.Second)
	l.tick.set(reconcilePeriod)
	l.create(reasonStart)
	return nil
}

// onStillWaiting: the progress alarm, while the driver is awaited.
func (l *loop) onStillWaiting() {
	l.progress.set(driverProgressEvery)
	l.log.Info("still waiting for the CSI driver", "waited", l.r.clock.Now().Sub(l.waitStart).Round(time.Second),
		"lastError", fmt.Sprint(l.lastErr), "check", "is the driver container running and listening on this socket?")
}

// onConnectionTimeout: Options.ConnectionTimeout passed without an answer.
func (l *loop) onConnectionTimeout() error {
	return optionFailed(OptionConnectionTimeout, fmt.Sprintf("the CSI driver at %s did not answer within %%[1]s=%s (waited %s): %%[2]v",
		l.r.driverPath, l.r.opts.ConnectionTimeout, l.r.clock.Now().Sub(l.waitStart).Round(time.Millisecond)), l.lastErr)
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
		l.drv.ResetBackoff()
		return l.lookAtDriver(ctx)
	}
	switch {
	case ev.Has(fsnotify.Create):
		l.drv.ResetBackoff()
		l.driverRetry.reset()
		l.recheck.set(0)
		l.log.Info("driver socket created again; the driver restarted", "outcome", "rechecking")
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		l.driverDown(errors.New("its socket was removed"))
	}
	return nil
}

// driverDown records and logs (once per outage) that the driver stopped answering.
func (l *loop) driverDown(err error) {
	l.r.metrics.setReachable(false)
	if !l.driverUp {
		return
	}
	l.driverUp = false
	l.log.Warn("driver stopped answering", "err", err, "outcome", "unreachable",
		"check", "is the driver container running? /readyz is 503 until it answers Probe again")
}

// driverBack records and logs (once per outage) that the driver answers again.
func (l *loop) driverBack() {
	l.r.metrics.setReachable(true)
	if l.driverUp {
		return
	}
	l.driverUp = true
	l.log.Info("driver answers again", "outcome", "reachable")
}

// scheduleRetry re-creates the socket after the next backoff delay.
func (l *loop) scheduleRetry(reason string) time.Duration {
	d := l.retry.next()
	l.retryAt.set(d)
	l.reason = reason
	return d
}

// await arms the kubelet alarm for the kubelet's next step.
func (l *loop) await(a awaiting, d time.Duration) {
	l.awaiting = a
	l.kubelet.stop()
	if a != awaitNothing {
		l.kubelet.set(d)
	}
}

// create serves a new registration socket at the path, replacing the
// current one, or enters the stage of the fault that prevents it.
func (l *loop) create(reason string) {
	l.retryAt.stop()
	l.await(awaitNothing, 0)
	if l.cur != nil {
		l.closeSocket(reason)
	}
	sock, err := sockfile.Listen(l.path)
	if err != nil {
		kind, stage := listenFault(err)
		d := l.scheduleRetry(string(kind))
		l.log.Error("registration socket not created", "outcome", string(kind), "err", err, "retryIn", d)
		l.publish(stage, err.Error())
		return
	}
	hooks := serverHooks{
		onGetInfo: func() { l.r.metrics.addGetInfo(); l.log.Debug("GetInfo from the kubelet") },
		onNotify:  func(st *registerapi.RegistrationStatus) { l.r.metrics.addNotification(st.PluginRegistered) },
	}
	l.cur = serveRegistration(sock, newRegistrationServer(l.name, l.r.opts.KubeletRegistrationPath, hooks), l.r.opts.ShutdownTimeout)
	// The directory may be a new one (it went missing): watch it again. For
	// the same directory this only refreshes the watch.
	if err := l.watcher.Add(filepath.Dir(l.path)); err != nil {
		l.log.Warn("cannot watch the registration directory; only the reconcile tick will notice changes", "err", err)
	}
	l.getInfos, l.handled = 0, nil
	l.r.metrics.addSocketCreation(reason)
	l.await(awaitGetInfo, l.r.opts.KubeletWait)
	l.log.Info("registration socket created", "reason", reason, "outcome", "serving")
	l.publish(StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
}

// closeSocket stops serving the current socket and removes its file if it
// still is ours, and says which it was.
func (l *loop) closeSocket(reason string) {
	removed := l.cur.stop()
	l.cur = nil
	_, err := os.Lstat(l.path)
	switch {
	case removed:
		l.log.Info("registration socket removed", "reason", reason, "outcome", "removed")
	case errors.Is(err, fs.ErrNotExist):
		l.log.Info("registration socket closed; its file was already gone", "reason", reason, "outcome", "gone")
	default:
		l.log.Info("registration socket closed; the file at its path is not ours, left in place", "reason", reason, "outcome", "kept")
	}
}

// onRegistrationSignal turns what the registration server recorded into
// events: a GetInfo, then a Notify.
func (l *loop) onRegistrationSignal() {
	n, last := l.cur.server.snapshot()
	if n > l.getInfos {
		l.getInfos = n
		l.onGetInfo()
	}
	if last != nil && last != l.handled {
		l.handled = last
		l.onNotify(last)
	}
}

// onGetInfo: the kubelet asked; its NotifyRegistrationStatus is due next. A
// GetInfo on a rejected socket before our own re-creation is a kubelet that
// retries by itself.
func (l *loop) onGetInfo() {
	if l.stage == StageRejected && l.retryAt.armed() && l.reason == reasonRejected {
		l.retryAt.stop()
		l.inferKubeletRetry(KubeletRetryItself)
	}
	l.await(awaitNotify, l.r.opts.KubeletWait)
	if l.stage == StageWaitingForKubelet {
		l.publish(StageWaitingForKubelet, "GetInfo answered, waiting for the kubelet's NotifyRegistrationStatus")
	}
}

// onNotify acts on the kubelet's verdict.
func (l *loop) onNotify(st *registerapi.RegistrationStatus) {
	if st.PluginRegistered {
		l.retry.reset()
		l.retryAt.stop()
		l.await(awaitNothing, 0)
		l.log.Info("kubelet confirmed the registration", "outcome", "registered")
		l.publish(StageRegistered, "")
		return
	}
	const check = "the kubelet log (RegisterPlugin error), the driver's NodeGetInfo answer, and Node labels that collide with its topology"
	if l.kubeletRetry == KubeletRetryItself {
		l.retryAt.stop()
		l.await(awaitRetry, kubeletRetrySilence)
		l.log.Error("kubelet rejected the registration", "outcome", "rejected", "kubeletError", st.Error,
			"kubeletRetry", KubeletRetryItself.String(), "recreateIfSilentFor", kubeletRetrySilence, "check", check)
		l.publish(StageRejected, st.Error+" (the kubelet retries by itself; socket kept)")
		return
	}
	l.await(awaitNothing, 0)
	d := l.scheduleRetry(reasonRejected)
	if l.kubeletRetry == KubeletRetryUnknown && d < kubeletRetryProbe {
		d = kubeletRetryProbe // give a kubelet that retries by itself the time to show it
		l.retryAt.set(d)
	}
	l.log.Error("kubelet rejected the registration", "outcome", "rejected", "kubeletError", st.Error, "retryIn", d, "check", check)
	l.publish(StageRejected, st.Error)
}

// inferKubeletRetry records what the kubelet's behaviour showed. "Retries
// itself" is kept for the life of the process, and each change is logged once.
func (l *loop) inferKubeletRetry(k KubeletRetry) {
	if l.kubeletRetry == KubeletRetryItself || l.kubeletRetry == k {
		return
	}
	l.kubeletRetry = k
	l.r.status.update(func(st *Status) { st.KubeletRetry = k })
	l.r.metrics.setKubeletRetry(k)
	switch k {
	case KubeletRetryItself:
		l.log.Info("kubelet retries registration by itself: keeping the socket", "kubeletRetry", k.String(), "outcome", "kept",
			"recreateIfSilentFor", kubeletRetrySilence)
	case KubeletRetryNever:
		l.log.Info("kubelet did not retry on the same socket: re-creating it after each rejection", "kubeletRetry", k.String(),
			"outcome", "recreating")
	}
}

// onRetryDue re-creates the socket. After a rejection, that no GetInfo came
// first means a kubelet that does not retry by itself.
func (l *loop) onRetryDue() {
	if l.reason == reasonRejected {
		l.inferKubeletRetry(KubeletRetryNever)
	}
	l.create(l.reason)
}

// onKubeletSilent: the kubelet's next step did not come; a new socket (a
// Create event for the kubelet's plugin watcher) makes it start over.
func (l *loop) onKubeletSilent() {
	wait := l.r.opts.KubeletWait
	switch l.awaiting {
	case awaitGetInfo:
		d := l.scheduleRetry(reasonKubeletSilent)
		l.log.Warn("no GetInfo from the kubelet; the socket will be re-created", "waited", wait, "retryIn", d, "outcome", "recreating",
			"check", "is the kubelet running, and is Options.PluginRegistrationPath its plugins_registry directory?")
		l.publish(StageWaitingForKubelet, fmt.Sprintf("no GetInfo from the kubelet for %s; new socket in %s", short(wait), short(d)))
	case awaitNotify:
		d := l.scheduleRetry(reasonNoNotify)
		l.log.Warn("GetInfo answered but no NotifyRegistrationStatus from the kubelet; the socket will be re-created",
			"waited", wait, "retryIn", d, "outcome", "recreating",
			"check", "the kubelet log: a NodeGetInfo call to the driver that hangs (kubernetes/kubernetes#138170)")
		l.publish(StageWaitingForKubelet, fmt.Sprintf("GetInfo answered, no NotifyRegistrationStatus for %s; new socket in %s", short(wait), short(d)))
	case awaitRetry:
		d := l.scheduleRetry(reasonKubeletSilent)
		l.log.Warn("the kubelet that retries by itself has been silent since the rejection; the socket will be re-created",
			"waited", kubeletRetrySilence, "retryIn", d, "outcome", "recreating")
		l.publish(StageRejected, fmt.Sprintf("%s (the kubelet stopped retrying for %s; new socket in %s)", l.handled.GetError(), short(kubeletRetrySilence), short(d)))
	}
	l.awaiting = awaitNothing
}

// onRegistrationSocketEvent: something happened at our path.
func (l *loop) onRegistrationSocketEvent(ev fsnotify.Event) {
	if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Create) {
		return
	}
	if l.cur == nil {
		if ev.Has(fsnotify.Remove) && l.retryAt.armed() {
			l.create(l.reason) // the path was freed: try now
		}
		return
	}
	if l.cur.sock.Owned() {
		return // about a socket of ours that is gone already
	}
	l.socketLost()
}

// socketLost: the path is no longer our socket. Deleted: serve a new one at
// once. Replaced: leave the other file alone and retry with backoff.
func (l *loop) socketLost() {
	if _, err := os.Lstat(l.path); errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("registration socket was deleted; re-creating it", "outcome", "recreating")
		l.create(reasonDeleted)
		return
	}
	occupied := sockfile.Occupied(l.path)
	kind, stage := listenFault(occupied)
	l.closeSocket("replaced")
	l.await(awaitNothing, 0)
	d := l.scheduleRetry(string(kind))
	l.log.Error("registration socket replaced by another file; not touching it", "outcome", string(kind), "err", occupied, "retryIn", d)
	l.publish(stage, fmt.Sprintf("%s was replaced by another process's file", l.path))
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
