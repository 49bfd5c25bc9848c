package registrar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/sockfile"
)

// The control loop, for one driver name, is a state machine in the manner of
// the kubelet's plugin manager: the desired state is "the kubelet confirmed
// <name>-reg.sock, which this process serves, and the driver answers"; the
// actual state is a session (below); every event is one method that compares
// them and takes the next step, and a reconcile tick looks again at what an
// event would have told, so that a lost event costs at most one period.
//
// Transitions ("serving" = any stage with a socket served: waiting for
// kubelet, kubelet rejected, registered):
//
//	stage                event                                   action                                     next stage
//	-------------------  --------------------------------------  -----------------------------------------  -----------------------
//	(start)              driver answered                         Listen                                     waiting for kubelet | socket <fault>
//	socket <fault>       retry due; path removed                 Listen                                     waiting for kubelet | socket <fault>
//	serving              GetInfo                                 await Notify for KubeletWait               unchanged
//	serving              Notify(true)                            reset backoff                              registered
//	serving              Notify(false), kubelet retries itself   keep socket, await GetInfo 2m30s           kubelet rejected
//	serving              Notify(false), otherwise                re-create after backoff (1s, 2s … max;     kubelet rejected
//	                                                             ≥ 3s while the kubelet's kind is unknown)
//	kubelet rejected     GetInfo before the re-creation          infer "kubelet retries itself", keep       kubelet rejected
//	kubelet rejected     retry due (no GetInfo came)             infer "kubelet never retries", Listen      waiting for kubelet | socket <fault>
//	waiting for kubelet  kubelet silent: no GetInfo/no Notify    re-create after backoff                    waiting for kubelet
//	kubelet rejected     kubelet silent: retrying kubelet quiet  re-create after backoff                    kubelet rejected
//	serving              socket deleted (event or reconcile)     Listen at once                             waiting for kubelet | socket <fault>
//	serving              socket replaced (event or reconcile)    stop serving, leave the file, retry        socket conflict | socket path is not a socket
//	serving              socket not served (reconcile)           Listen                                     waiting for kubelet | socket <fault>
//	any                  driver socket created or new (rec.)     ask the name again                         unchanged | (new session: renamed)
//	any                  Probe answers again (reconcile)         log, ask the name again                    unchanged | (new session: renamed)
//	any                  driver socket removed; Probe fails      log, driver_reachable 0                    unchanged (/readyz 503)
//	any                  file watcher error (queue overflow)     reconcile now, with a GetInfo of our own   as the reconcile finds
//	any                  reconcile tick (every 5 min)            reconcile (see reconcile.go)               as the reconcile finds
//	any                  ctx done                                stop serving, remove our socket            stopped
//
// socket <fault> is one stage per listen error kind (socketfault.go): socket
// conflict, socket path is not a socket, socket permission denied,
// registration directory missing, socket error.
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
)

// Reasons of a socket creation (csi_registrar_socket_creations_total{reason});
// a listen fault adds its own (socketfault.go).
const (
	reasonStart         = "start"
	reasonDeleted       = "deleted"
	reasonRejected      = "rejected"
	reasonKubeletSilent = "kubelet-silent" // no GetInfo on a new socket, or a retrying kubelet gone quiet
	reasonNoNotify      = "no-notify"      // GetInfo answered, no NotifyRegistrationStatus within KubeletWait
	reasonUnresponsive  = "unresponsive"   // our socket did not answer GetInfo at a reconcile
)

// awaiting is the kubelet's next step, whose absence the kubelet alarm catches.
type awaiting int

const (
	awaitNothing awaiting = iota
	awaitGetInfo          // a new socket: the kubelet's first GetInfo
	awaitNotify           // GetInfo answered: the kubelet's NotifyRegistrationStatus
	awaitRetry            // a kubelet that retries by itself, after a rejection: its next GetInfo
)

// session is the actual state of the registration of one driver name.
type session struct {
	r       *Registrar
	drv     *driverClient
	watcher *fsnotify.Watcher
	name    string
	path    string
	log     *slog.Logger

	cur      *servingSocket                  // nil while the path cannot be served
	getInfos int                             // GetInfo calls on cur already handled
	handled  *registerapi.RegistrationStatus // last Notify on cur acted on
	awaiting awaiting
	driverUp bool             // the driver answered at the last look
	driverID csiplugin.FileID // the driver socket the driver answered on
	retry    *backoff         // between socket re-creations
	retryAt  alarm            // re-create the socket
	reason   string           // of the re-creation retryAt triggers
	kubelet  alarm            // the kubelet's next step is overdue
	recheck  alarm            // ask the driver its name again
	recheckB *backoff         // between rechecks of a driver that does not answer
	tick     alarm            // reconcile
}

func (r *Registrar) newSession(drv *driverClient, watcher *fsnotify.Watcher, name string) (*session, error) {
	path, err := csiplugin.RegistrationSocketPath(r.opts.PluginRegistrationPath, name)
	if err != nil {
		return nil, err
	}
	r.status.update(func(st *Status) { st.DriverName, st.SocketPath = name, path })
	id, _ := csiplugin.FileIDOf(r.driverPath)
	return &session{
		r: r, drv: drv, watcher: watcher, name: name, path: path,
		log:      r.log.With("driver", name, "socket", path),
		driverUp: true,
		driverID: id,
		retry:    newBackoff(time.Second, r.opts.RegistrationRetryMax),
		recheckB: newBackoff(100*time.Millisecond, 10*time.Second),
		retryAt:  newAlarm(r.clock), kubelet: newAlarm(r.clock), recheck: newAlarm(r.clock), tick: newAlarm(r.clock),
	}, nil
}

// run keeps the registration socket alive until ctx ends (nil) or the
// driver comes back under another name (that name).
func (s *session) run(ctx context.Context) (renamed string, err error) {
	watcher := s.watcher
	defer s.shutdown()
	s.tick.set(reconcilePeriod)
	s.create(reasonStart)
	for {
		var signal <-chan struct{}
		if s.cur != nil {
			signal = s.cur.server.signal
		}
		select {
		case <-ctx.Done():
			return "", nil
		case reply := <-s.r.ping:
			close(reply)
		case <-signal:
			s.onRegistrationSignal()
		case <-s.retryAt.c():
			s.retryAt.stop()
			s.onRetryDue()
		case <-s.kubelet.c():
			s.kubelet.stop()
			s.onKubeletSilent()
		case <-s.recheck.c():
			s.recheck.stop()
			renamed, err = s.onRecheckDue(ctx)
		case <-s.tick.c():
			s.tick.set(reconcilePeriod)
			renamed, err = s.reconcile(ctx, "tick", false)
		case werr, ok := <-watcher.Errors:
			if !ok {
				return "", errors.New("file watcher closed")
			}
			s.log.Warn("file watcher error; reconciling now", "err", werr, "outcome", "reconciling")
			renamed, err = s.reconcile(ctx, "watcher error", true)
		case ev, ok := <-watcher.Events:
			if !ok {
				return "", errors.New("file watcher closed")
			}
			switch filepath.Clean(ev.Name) {
			case s.r.driverPath:
				s.onDriverSocketEvent(ev)
			case s.path:
				s.onRegistrationSocketEvent(ev)
			}
		}
		if err != nil || renamed != "" {
			return renamed, err
		}
	}
}

// enter publishes the next stage. Every transition arms its timers (and
// logs) first, so whoever sees the stage sees the timers that go with it.
func (s *session) enter(stage Stage, detail string) { s.r.setStage(stage, detail) }

func (s *session) stage() Stage { return s.r.Status().Stage }

// scheduleRetry re-creates the socket after the next backoff delay.
func (s *session) scheduleRetry(reason string) time.Duration {
	d := s.retry.next()
	s.retryAt.set(d)
	s.reason = reason
	return d
}

// await arms the kubelet alarm for the kubelet's next step.
func (s *session) await(a awaiting, d time.Duration) {
	s.awaiting = a
	s.kubelet.stop()
	if a != awaitNothing {
		s.kubelet.set(d)
	}
}

// create serves a new registration socket at the path, replacing the
// current one, or enters the stage of the fault that prevents it.
func (s *session) create(reason string) {
	s.retryAt.stop()
	s.await(awaitNothing, 0)
	if s.cur != nil {
		s.closeSocket(reason)
	}
	sock, err := sockfile.Listen(s.path)
	if err != nil {
		kind, stage := listenFault(err)
		d := s.scheduleRetry(string(kind))
		s.log.Error("registration socket not created", "outcome", string(kind), "err", err, "retryIn", d)
		s.enter(stage, err.Error())
		return
	}
	hooks := serverHooks{
		onGetInfo: func() { s.r.metrics.addGetInfo(); s.log.Debug("GetInfo from the kubelet") },
		onNotify:  func(st *registerapi.RegistrationStatus) { s.r.metrics.addNotification(st.PluginRegistered) },
	}
	s.cur = serveRegistration(sock, newRegistrationServer(s.name, s.r.opts.KubeletRegistrationPath, hooks), s.r.opts.ShutdownTimeout)
	// The directory may be a new one (it went missing): watch it again. For
	// the same directory this only refreshes the watch.
	if err := s.watcher.Add(filepath.Dir(s.path)); err != nil {
		s.log.Warn("cannot watch the registration directory; only the reconcile tick will notice changes", "err", err)
	}
	s.getInfos, s.handled = 0, nil
	s.r.metrics.addSocketCreation(reason)
	s.await(awaitGetInfo, s.r.opts.KubeletWait)
	s.log.Info("registration socket created", "reason", reason, "outcome", "serving")
	s.enter(StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
}

// closeSocket stops serving the current socket and removes its file if it
// still is ours, and says which it was.
func (s *session) closeSocket(reason string) {
	removed := s.cur.stop()
	s.cur = nil
	_, err := os.Lstat(s.path)
	switch {
	case removed:
		s.log.Info("registration socket removed", "reason", reason, "outcome", "removed")
	case errors.Is(err, fs.ErrNotExist):
		s.log.Info("registration socket closed; its file was already gone", "reason", reason, "outcome", "gone")
	default:
		s.log.Info("registration socket closed; the file at its path is not ours, left in place", "reason", reason, "outcome", "kept")
	}
}

// onRegistrationSignal turns what the registration server recorded into
// events: a GetInfo, then a Notify.
func (s *session) onRegistrationSignal() {
	n, last := s.cur.server.snapshot()
	if n > s.getInfos {
		s.getInfos = n
		s.onGetInfo()
	}
	if last != nil && last != s.handled {
		s.handled = last
		s.onNotify(last)
	}
}

// onGetInfo: the kubelet asked; its NotifyRegistrationStatus is due next. A
// GetInfo on a rejected socket before our own re-creation is a kubelet that
// retries by itself.
func (s *session) onGetInfo() {
	if s.stage() == StageRejected && s.retryAt.armed() && s.reason == reasonRejected {
		s.retryAt.stop()
		s.inferKubeletRetry(KubeletRetryItself)
	}
	s.await(awaitNotify, s.r.opts.KubeletWait)
	if s.stage() == StageWaitingForKubelet {
		s.enter(StageWaitingForKubelet, "GetInfo answered, waiting for the kubelet's NotifyRegistrationStatus")
	}
}

// onNotify acts on the kubelet's verdict.
func (s *session) onNotify(st *registerapi.RegistrationStatus) {
	if st.PluginRegistered {
		s.retry.reset()
		s.retryAt.stop()
		s.await(awaitNothing, 0)
		s.log.Info("kubelet confirmed the registration", "outcome", "registered")
		s.enter(StageRegistered, "")
		return
	}
	const check = "the kubelet log (RegisterPlugin error), the driver's NodeGetInfo answer, and Node labels that collide with its topology"
	if s.r.Status().KubeletRetry == KubeletRetryItself {
		s.retryAt.stop()
		s.await(awaitRetry, kubeletRetrySilence)
		s.log.Error("kubelet rejected the registration", "outcome", "rejected", "kubeletError", st.Error,
			"kubeletRetry", KubeletRetryItself.String(), "recreateIfSilentFor", kubeletRetrySilence, "check", check)
		s.enter(StageRejected, st.Error+" (the kubelet retries by itself; socket kept)")
		return
	}
	s.await(awaitNothing, 0)
	d := s.scheduleRetry(reasonRejected)
	if s.r.Status().KubeletRetry == KubeletRetryUnknown && d < kubeletRetryProbe {
		d = kubeletRetryProbe // give a kubelet that retries by itself the time to show it
		s.retryAt.set(d)
	}
	s.log.Error("kubelet rejected the registration", "outcome", "rejected", "kubeletError", st.Error, "retryIn", d, "check", check)
	s.enter(StageRejected, st.Error)
}

// inferKubeletRetry records what the kubelet's behaviour showed. "Retries
// itself" is kept for the life of the process (the Registrar outlives a
// session), and each change is logged once.
func (s *session) inferKubeletRetry(k KubeletRetry) {
	changed := false
	s.r.status.update(func(st *Status) {
		if st.KubeletRetry != KubeletRetryItself && st.KubeletRetry != k {
			st.KubeletRetry, changed = k, true
		}
	})
	if !changed {
		return
	}
	s.r.metrics.setKubeletRetry(k)
	switch k {
	case KubeletRetryItself:
		s.log.Info("kubelet retries registration by itself: keeping the socket", "kubeletRetry", k.String(), "outcome", "kept",
			"recreateIfSilentFor", kubeletRetrySilence)
	case KubeletRetryNever:
		s.log.Info("kubelet did not retry on the same socket: re-creating it after each rejection", "kubeletRetry", k.String(),
			"outcome", "recreating")
	}
}

// onRetryDue re-creates the socket. After a rejection, that no GetInfo came
// first means a kubelet that does not retry by itself.
func (s *session) onRetryDue() {
	if s.reason == reasonRejected {
		s.inferKubeletRetry(KubeletRetryNever)
	}
	s.create(s.reason)
}

// onKubeletSilent: the kubelet's next step did not come; a new socket (a
// Create event for the kubelet's plugin watcher) makes it start over.
func (s *session) onKubeletSilent() {
	wait := s.r.opts.KubeletWait
	switch a := s.awaiting; a {
	case awaitGetInfo:
		d := s.scheduleRetry(reasonKubeletSilent)
		s.log.Warn("no GetInfo from the kubelet; the socket will be re-created", "waited", wait, "retryIn", d, "outcome", "recreating",
			"check", "is the kubelet running, and is Options.PluginRegistrationPath its plugins_registry directory?")
		s.enter(StageWaitingForKubelet, fmt.Sprintf("no GetInfo from the kubelet for %s; new socket in %s", short(wait), short(d)))
	case awaitNotify:
		d := s.scheduleRetry(reasonNoNotify)
		s.log.Warn("GetInfo answered but no NotifyRegistrationStatus from the kubelet; the socket will be re-created",
			"waited", wait, "retryIn", d, "outcome", "recreating",
			"check", "the kubelet log: a NodeGetInfo call to the driver that hangs (kubernetes/kubernetes#138170)")
		s.enter(StageWaitingForKubelet, fmt.Sprintf("GetInfo answered, no NotifyRegistrationStatus for %s; new socket in %s", short(wait), short(d)))
	case awaitRetry:
		d := s.scheduleRetry(reasonKubeletSilent)
		s.log.Warn("the kubelet that retries by itself has been silent since the rejection; the socket will be re-created",
			"waited", kubeletRetrySilence, "retryIn", d, "outcome", "recreating")
		s.enter(StageRejected, fmt.Sprintf("%s (the kubelet stopped retrying for %s; new socket in %s)", s.handled.GetError(), short(kubeletRetrySilence), short(d)))
	}
	s.awaiting = awaitNothing
}

// onRegistrationSocketEvent: something happened at our path.
func (s *session) onRegistrationSocketEvent(ev fsnotify.Event) {
	if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Create) {
		return
	}
	if s.cur == nil {
		if ev.Has(fsnotify.Remove) && s.retryAt.armed() {
			s.create(s.reason) // the path was freed: try now
		}
		return
	}
	if s.cur.sock.Owned() {
		return // about a socket of ours that is gone already
	}
	s.socketLost()
}

// socketLost: the path is no longer our socket. Deleted: serve a new one at
// once. Replaced: leave the other file alone and retry with backoff.
func (s *session) socketLost() {
	if _, err := os.Lstat(s.path); errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("registration socket was deleted; re-creating it", "outcome", "recreating")
		s.create(reasonDeleted)
		return
	}
	occupied := sockfile.Occupied(s.path)
	kind, stage := listenFault(occupied)
	s.closeSocket("replaced")
	s.await(awaitNothing, 0)
	d := s.scheduleRetry(string(kind))
	s.log.Error("registration socket replaced by another file; not touching it", "outcome", string(kind), "err", occupied, "retryIn", d)
	s.enter(stage, fmt.Sprintf("%s was replaced by another process's file", s.path))
}

// onDriverSocketEvent: the driver's socket was created (a restart: ask its
// name again) or removed (it stopped).
func (s *session) onDriverSocketEvent(ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create):
		s.drv.ResetBackoff()
		s.recheckB.reset()
		s.recheck.set(0)
		s.log.Info("driver socket created again; the driver restarted", "outcome", "rechecking")
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		s.driverDown(errors.New("its socket was removed"))
	}
}

// onRecheckDue asks the driver its name again: the same name keeps the
// session; another one ends it (renamed); an invalid one ends Run.
func (s *session) onRecheckDue(ctx context.Context) (renamed string, err error) {
	name, err := s.r.identify(ctx, s.drv)
	if csiplugin.IsValidationError(err) {
		return "", err
	}
	if err != nil {
		s.driverDown(err)
		d := s.recheckB.next()
		s.recheck.set(d)
		s.log.Info("driver not answering after it came back", "err", err, "retryIn", d, "outcome", "rechecking")
		return "", nil
	}
	s.recheckB.reset()
	s.driverID, _ = csiplugin.FileIDOf(s.r.driverPath)
	s.driverBack()
	if name == s.name {
		s.log.Info("driver came back under the same name", "outcome", "unchanged")
		return "", nil
	}
	s.log.Info("driver came back under another name; registering it instead", "newDriver", name, "outcome", "renamed")
	return name, nil
}

// driverDown records and logs (once per outage) that the driver stopped answering.
func (s *session) driverDown(err error) {
	s.r.metrics.setReachable(false)
	if !s.driverUp {
		return
	}
	s.driverUp = false
	s.log.Warn("driver stopped answering", "err", err, "outcome", "unreachable",
		"check", "is the driver container running? /readyz is 503 until it answers Probe again")
}

// driverBack records and logs (once per outage) that the driver answers again.
func (s *session) driverBack() {
	s.r.metrics.setReachable(true)
	if s.driverUp {
		return
	}
	s.driverUp = true
	s.log.Info("driver answers again", "outcome", "reachable")
}

// shutdown stops every timer and the socket (removing it if it still is ours).
func (s *session) shutdown() {
	s.retryAt.stop()
	s.kubelet.stop()
	s.recheck.stop()
	s.tick.stop()
	if s.cur != nil {
		s.closeSocket("exit")
	}
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
