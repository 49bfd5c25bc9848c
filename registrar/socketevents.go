package registrar

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// The control loop's handlers of the registration socket's and the
// kubelet's events, one per event, and the steps they share.

// scheduleRetry re-creates the socket after the next backoff delay.
func (l *loop) scheduleRetry(reason string) time.Duration {
	d := l.sock.backoff.next()
	l.alarms.retryAt.set(d)
	l.sock.reason = reason
	return d
}

// await arms the kubelet alarm for the kubelet's next step.
func (l *loop) await(a awaiting, d time.Duration) {
	l.sock.awaiting = a
	l.alarms.kubelet.stop()
	if a != awaitNothing {
		l.alarms.kubelet.set(d)
	}
}

// create serves a new registration socket at the path, replacing the
// current one, or enters the stage of the fault that prevents it.
func (l *loop) create(reason string) {
	l.alarms.retryAt.stop()
	l.await(awaitNothing, 0)
	if l.sock.cur != nil {
		l.closeSocket(reason)
	}
	sock, err := sockfile.Listen(l.sock.path)
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
	l.sock.cur = serveRegistration(sock, newRegistrationServer(l.driver.name, l.r.opts.KubeletRegistrationPath, hooks), l.r.opts.ShutdownTimeout)
	// The directory may be a new one (it went missing): watch it again. For
	// the same directory this only refreshes the watch.
	if err := l.watcher.Add(filepath.Dir(l.sock.path)); err != nil {
		l.log.Warn("cannot watch the registration directory; only the reconcile tick will notice changes", "err", err)
	}
	l.sock.getInfos, l.sock.handled = 0, nil
	l.r.metrics.addSocketCreation(reason)
	l.await(awaitGetInfo, l.r.opts.KubeletWait)
	l.log.Info("registration socket created", "reason", reason, "outcome", "serving")
	l.publish(StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
}

// closeSocket stops serving the current socket and removes its file if it
// still is ours, and says which it was.
func (l *loop) closeSocket(reason string) {
	removed := l.sock.cur.stop()
	l.sock.cur = nil
	_, err := os.Lstat(l.sock.path)
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
	n, last := l.sock.cur.server.snapshot()
	if n > l.sock.getInfos {
		l.sock.getInfos = n
		l.onGetInfo()
	}
	if last != nil && last != l.sock.handled {
		l.sock.handled = last
		l.onNotify(last)
	}
}

// onGetInfo: the kubelet asked; its NotifyRegistrationStatus is due next. A
// GetInfo on a rejected socket before our own re-creation is a kubelet that
// retries by itself.
func (l *loop) onGetInfo() {
	if l.stage == StageRejected && l.alarms.retryAt.armed() && l.sock.reason == reasonRejected {
		l.alarms.retryAt.stop()
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
		l.sock.backoff.reset()
		l.alarms.retryAt.stop()
		l.await(awaitNothing, 0)
		l.log.Info("kubelet confirmed the registration", "outcome", "registered")
		l.publish(StageRegistered, "")
		return
	}
	const check = "the kubelet log (RegisterPlugin error), the driver's NodeGetInfo answer, and Node labels that collide with its topology"
	if l.kubeletRetry == KubeletRetryItself {
		l.alarms.retryAt.stop()
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
		l.alarms.retryAt.set(d)
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
	if l.sock.reason == reasonRejected {
		l.inferKubeletRetry(KubeletRetryNever)
	}
	l.create(l.sock.reason)
}

// onKubeletSilent: the kubelet's next step did not come; a new socket (a
// Create event for the kubelet's plugin watcher) makes it start over.
func (l *loop) onKubeletSilent() {
	wait := l.r.opts.KubeletWait
	switch l.sock.awaiting {
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
		l.publish(StageRejected, fmt.Sprintf("%s (the kubelet stopped retrying for %s; new socket in %s)", l.sock.handled.GetError(), short(kubeletRetrySilence), short(d)))
	}
	l.sock.awaiting = awaitNothing
}

// onRegistrationSocketEvent: something happened at our path.
func (l *loop) onRegistrationSocketEvent(ev fsnotify.Event) {
	if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Create) {
		return
	}
	if l.sock.cur == nil {
		// The path was freed: try now.
		if ev.Has(fsnotify.Remove) && l.alarms.retryAt.armed() {
			l.create(l.sock.reason)
		}
		return
	}
	if l.sock.cur.sock.Owned() {
		return // about a socket of ours that is gone already
	}
	l.socketLost()
}

// socketLost: the path is no longer our socket. Deleted: serve a new one at
// once. Replaced: leave the other file alone and retry with backoff.
func (l *loop) socketLost() {
	if _, err := os.Lstat(l.sock.path); errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("registration socket was deleted; re-creating it", "outcome", "recreating")
		l.create(reasonDeleted)
		return
	}
	occupied := sockfile.Occupied(l.sock.path)
	kind, stage := listenFault(occupied)
	l.closeSocket("replaced")
	l.await(awaitNothing, 0)
	d := l.scheduleRetry(string(kind))
	l.log.Error("registration socket replaced by another file; not touching it", "outcome", string(kind), "err", occupied, "retryIn", d)
	l.publish(stage, fmt.Sprintf("%s was replaced by another process's file", l.sock.path))
}

// onDirEvent: a file event in the registration directory that is not
// about our current socket.
func (l *loop) onDirEvent(name string, ev fsnotify.Event) {
	if !ev.Has(fsnotify.Remove) {
		return
	}
	l.onOtherSocketRemoved(name)
}

// kubeletSettle is how long the registrar waits after a Remove by name of
// another registered socket of its driver before it registers again: the
// kubelet's reconciler runs every second and unregisters the driver in its
// next round; the rest is margin for its API writes.
const kubeletSettle = 3 * time.Second

// onOtherSocketRemoved: an announcement of the previous release's
// rolling-update mode for this driver was unlinked by name in the
// registration directory (an instance of that mode left with no successor
// in it: a rollout undone past the opt-in, or the upgrade from it, while
// this registrar's pod had already started).
// The kubelet's CSI handler unregisters the driver by name, whoever
// registered last, so this registrar registers again once the kubelet has
// processed the Remove (kubeletSettle): a new socket, as after a rejection.
// A socket the kubelet had not registered costs one needless re-registration.
func (l *loop) onOtherSocketRemoved(name string) {
	if _, _, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, name); !ok || l.sock.cur == nil {
		return
	}
	l.alarms.retryAt.set(kubeletSettle)
	l.sock.reason = reasonOtherRemoved
	l.log.Info("a rolling-update socket of this driver was removed: the kubelet unregisters the driver by name; registering again",
		"removed", name, "in", kubeletSettle, "outcome", "scheduled")
}
