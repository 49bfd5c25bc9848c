// Package registrar registers a CSI driver with the kubelet through the plugin
// registration socket (pluginregistration.v1), and keeps it registered.
//
// A Registrar learns the driver's name from Identity.GetPluginInfo (or takes it
// from Options.DriverName), serves <PluginRegistrationPath>/<name>-reg.sock and
// watches the outcome: it re-creates the socket when the kubelet rejects the
// registration, stays silent, or the socket is deleted, and it registers again
// under a new name when the driver comes back with one. It never removes a file
// it did not create, and it reports on /healthz, /readyz and /metrics what the
// kubelet actually confirmed.
//
// The registrar runs as a sidecar (`csi-registrar register`) or inside a driver
// process: create one with New and call Run with a context that ends it.
package registrar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/sockfile"
)

// Options configure a Registrar. The zero value of a duration means its default.
type Options struct {
	// CSIAddress is the driver's socket as this process sees it: a path or a
	// unix:// URL. Default /run/csi/socket.
	CSIAddress string
	// KubeletRegistrationPath is the driver's socket path on the host, which
	// the kubelet dials (GetInfo's Endpoint). Required.
	KubeletRegistrationPath string
	// PluginRegistrationPath is the directory mounted from the kubelet's
	// plugins_registry. Default /registration.
	PluginRegistrationPath string
	// DriverName, when set, is registered without asking GetPluginInfo; the
	// driver must still answer Probe before the socket is created.
	DriverName string
	// Timeout bounds each call to the driver (GetPluginInfo, Probe). Default 1s.
	Timeout time.Duration
	// ConnectionTimeout bounds the wait for the driver at start; 0 waits forever.
	ConnectionTimeout time.Duration
	// KubeletWait is how long to wait for the kubelet's GetInfo on a new socket
	// before re-creating it. Default 2m.
	KubeletWait time.Duration
	// RegistrationRetryMax caps the backoff (1 s doubling) between socket
	// re-creations after a rejection, silence or conflict. Default 5m.
	RegistrationRetryMax time.Duration
	// HTTPEndpoint, if set, is the TCP address serving /healthz, /readyz and
	// /metrics (and /debug/pprof/ with EnablePprof).
	HTTPEndpoint string
	EnablePprof  bool
	// ShutdownTimeout bounds how long stopping a registration socket (at
	// exit, or to re-create it) lets running calls finish before it cancels
	// them and closes their connections. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Version is the label of csi_registrar_build_info; empty: the main
	// module's version from the build information.
	Version string
	// Logger receives one line per lifecycle event. Default slog.Default().
	Logger *slog.Logger
}

// Defaults for Options.
const (
	DefaultCSIAddress             = "/run/csi/socket"
	DefaultPluginRegistrationPath = "/registration"
	DefaultTimeout                = time.Second
	DefaultKubeletWait            = 2 * time.Minute
	DefaultRegistrationRetryMax   = 5 * time.Minute
)

// Registrar registers one CSI driver with the kubelet. Create it with New.
type Registrar struct {
	opts       Options
	log        *slog.Logger
	driverPath string
	status     statusBox
	metrics    *metrics
	ping       chan chan struct{} // liveness: the control loop closes what it receives
	exited     chan struct{}      // closed when Run returns
	driver     *driverClient      // set by Run before any HTTP request can reach it

	// driverChecks counts how often the driver wait looked at the socket:
	// once at start and once per file event or retry, never on a clock.
	driverChecks atomic.Int64
}

// New checks opts and returns a Registrar. A *ValidationError means the
// options are wrong; nothing has been created.
func New(opts Options) (*Registrar, error) {
	if opts.CSIAddress == "" {
		opts.CSIAddress = DefaultCSIAddress
	}
	if opts.PluginRegistrationPath == "" {
		opts.PluginRegistrationPath = DefaultPluginRegistrationPath
	}
	opts.PluginRegistrationPath = filepath.Clean(opts.PluginRegistrationPath)
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.KubeletWait == 0 {
		opts.KubeletWait = DefaultKubeletWait
	}
	if opts.RegistrationRetryMax == 0 {
		opts.RegistrationRetryMax = DefaultRegistrationRetryMax
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--timeout", opts.Timeout}, {"--connection-timeout", opts.ConnectionTimeout},
		{"--kubelet-wait", opts.KubeletWait}, {"--registration-retry-max", opts.RegistrationRetryMax}} {
		if d.v < 0 {
			return nil, &ValidationError{What: d.flag, Value: d.v.String(), Rule: "must not be negative", Fix: "use a duration such as 1s or 2m"}
		}
	}
	if err := checkLimits(&opts); err != nil {
		return nil, err
	}
	path, err := ParseEndpoint(opts.CSIAddress)
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.What = "--csi-address"
		}
		return nil, err
	}
	if err := ValidateKubeletRegistrationPath(opts.KubeletRegistrationPath); err != nil {
		return nil, err
	}
	if opts.DriverName != "" {
		// Checks the name and that its socket path fits.
		if _, err := RegistrationSocketPath(opts.PluginRegistrationPath, opts.DriverName); err != nil {
			return nil, err
		}
	}
	return &Registrar{
		opts:       opts,
		log:        opts.Logger.With("csiAddress", path),
		driverPath: filepath.Clean(path),
		metrics:    newMetrics(opts.Version),
		ping:       make(chan chan struct{}),
		exited:     make(chan struct{}),
	}, nil
}

// Status returns the current registration status.
func (r *Registrar) Status() Status { return r.status.get() }

func (r *Registrar) setStage(s Stage, detail string) {
	r.status.update(func(st *Status) {
		if st.Stage != s {
			st.Since = time.Now()
		}
		st.Stage, st.Detail = s, detail
	})
}

// Run registers the driver and keeps it registered until ctx ends, then stops
// serving and removes the registration socket if it still is the one this
// Registrar created. It returns nil when ctx ends, a *ValidationError when the
// driver reports an invalid name, and other errors when the driver cannot be
// reached within ConnectionTimeout or a directory cannot be watched.
func (r *Registrar) Run(ctx context.Context) error {
	defer close(r.exited)
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("start file watcher: %w", err)
	}
	defer watcher.Close()

	drv, err := newDriverClient(r.driverPath, r.opts.Timeout)
	if err != nil {
		return err
	}
	defer drv.Close()
	r.driver = drv

	if r.opts.HTTPEndpoint != "" {
		stop, err := r.startHTTP()
		if err != nil {
			return err
		}
		defer stop()
	}

	if err := watcher.Add(filepath.Dir(r.driverPath)); err != nil {
		return fmt.Errorf("watch %s, the directory of the driver socket %s: %w; check the volume mount of --csi-address",
			filepath.Dir(r.driverPath), r.driverPath, err)
	}
	name, err := r.waitForDriver(ctx, watcher, drv)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := watcher.Add(r.opts.PluginRegistrationPath); err != nil {
		return fmt.Errorf("watch --plugin-registration-path %s: %w; mount the kubelet's plugins_registry there",
			r.opts.PluginRegistrationPath, err)
	}
	for {
		renamed, err := r.serve(ctx, watcher, drv, name)
		if err != nil || renamed == "" {
			return err
		}
		name = renamed
	}
}

// waitForDriver waits until the driver socket exists and the driver answers,
// and returns the validated driver name. It wakes on file events in the
// socket's directory, not on a polling interval; only a socket that exists
// but refuses is retried with a short backoff.
func (r *Registrar) waitForDriver(ctx context.Context, watcher *fsnotify.Watcher, drv *driverClient) (string, error) {
	start := time.Now()
	r.setStage(StageWaitingForDriver, "connecting to "+r.driverPath)
	var deadline <-chan time.Time
	if r.opts.ConnectionTimeout > 0 {
		t := time.NewTimer(r.opts.ConnectionTimeout)
		defer t.Stop()
		deadline = t.C
	}
	progress := time.NewTicker(10 * time.Second) // log line only; waking is event-driven
	defer progress.Stop()
	retry := newBackoff(10*time.Millisecond, time.Second)
	var retryAt alarm
	defer retryAt.stop()
	var lastErr error
	for {
		r.driverChecks.Add(1)
		st, err := os.Stat(r.driverPath)
		switch {
		case err == nil && st.Mode().Type() == fs.ModeSocket:
			name, err := r.identify(ctx, drv)
			if err == nil {
				r.metrics.setReachable(true)
				r.log.Info("driver answered", "driver", name, "socket", r.driverPath, "outcome", "answered", "waited", time.Since(start).Round(time.Millisecond))
				return name, nil
			}
			if !retryable(err) {
				return "", err
			}
			lastErr = err
			retryAt.set(retry.next())
		case err == nil:
			return "", fmt.Errorf("--csi-address %s is a %s, not a socket: point --csi-address at the socket the CSI driver listens on",
				r.driverPath, fileKind(st.Mode()))
		case errors.Is(err, fs.ErrNotExist):
			lastErr = errors.New("socket does not exist yet")
		default:
			return "", fmt.Errorf("inspect --csi-address %s: %w", r.driverPath, err)
		}
		r.metrics.setReachable(false)
		r.setStage(StageWaitingForDriver, lastErr.Error())

	wait:
		for {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case ev, ok := <-watcher.Events:
				if !ok {
					return "", errors.New("file watcher closed")
				}
				if filepath.Clean(ev.Name) == r.driverPath {
					drv.ResetBackoff()
					break wait
				}
			case err := <-watcher.Errors:
				r.log.Warn("file watcher error", "err", err)
			case <-retryAt.c():
				retryAt.stop()
				break wait
			case <-progress.C:
				r.log.Info("still waiting for the CSI driver", "waited", time.Since(start).Round(time.Second),
					"lastError", lastErr.Error(), "check", "is the driver container running and listening on this socket?")
			case <-deadline:
				return "", fmt.Errorf("the CSI driver at %s did not answer within --connection-timeout=%s (waited %s): %v",
					r.driverPath, r.opts.ConnectionTimeout, time.Since(start).Round(time.Millisecond), lastErr)
			case reply := <-r.ping:
				close(reply)
			}
		}
	}
}

// identify returns the name to register: Options.DriverName once the driver
// answers Probe, or the validated name from GetPluginInfo.
func (r *Registrar) identify(ctx context.Context, drv *driverClient) (string, error) {
	if r.opts.DriverName != "" {
		if err := drv.Probe(ctx); err != nil {
			return "", err
		}
		return r.opts.DriverName, nil
	}
	name, err := drv.PluginName(ctx)
	if err != nil {
		return "", err
	}
	if _, err := RegistrationSocketPath(r.opts.PluginRegistrationPath, name); err != nil {
		return "", fmt.Errorf("the driver at %s reported a name the kubelet cannot register: %w", r.driverPath, err)
	}
	return name, nil
}

// serve keeps the registration socket for name alive until ctx ends (nil) or
// the driver comes back under another name (that name).
func (r *Registrar) serve(ctx context.Context, watcher *fsnotify.Watcher, drv *driverClient, name string) (renamed string, err error) {
	path, err := RegistrationSocketPath(r.opts.PluginRegistrationPath, name)
	if err != nil {
		return "", err
	}
	log := r.log.With("driver", name, "socket", path)
	r.status.update(func(st *Status) { st.DriverName, st.SocketPath = name, path })

	var (
		cur            *servingSocket
		handled        *registerapi.RegistrationStatus // last Notify acted on
		retry          = newBackoff(time.Second, r.opts.RegistrationRetryMax)
		recheckBackoff = newBackoff(100*time.Millisecond, 10*time.Second)
		retryAt        alarm // re-create the socket
		retryReason    string
		silence        alarm // no GetInfo since the socket was created
		recheck        alarm // ask the driver's name again
	)
	defer func() {
		retryAt.stop()
		silence.stop()
		recheck.stop()
		if cur != nil {
			r.stopSocket(log, cur, "exit")
		}
	}()
	hooks := serverHooks{
		onGetInfo: func() {
			r.metrics.addGetInfo()
			log.Debug("GetInfo from the kubelet")
		},
		onNotify: func(st *registerapi.RegistrationStatus) {
			r.metrics.addNotification(st.PluginRegistered)
		},
	}
	scheduleRetry := func(reason string) time.Duration {
		d := retry.next()
		retryAt.set(d)
		retryReason = reason
		return d
	}
	create := func(reason string) {
		retryAt.stop()
		silence.stop()
		if cur != nil {
			r.stopSocket(log, cur, reason)
			cur = nil
		}
		sock, err := sockfile.Listen(path)
		if err != nil {
			d := scheduleRetry("conflict")
			r.setStage(StageSocketConflict, err.Error())
			log.Error("registration socket not created", "outcome", "conflict", "err", err, "retryIn", d)
			return
		}
		cur = serveRegistration(sock, newRegistrationServer(name, r.opts.KubeletRegistrationPath, hooks), r.opts.ShutdownTimeout)
		handled = nil
		r.metrics.addSocketCreation(reason)
		r.setStage(StageWaitingForKubelet, "socket created, no GetInfo from the kubelet yet")
		log.Info("registration socket created", "reason", reason, "outcome", "serving")
		silence.set(r.opts.KubeletWait)
	}

	create("start")
	for {
		var signal <-chan struct{}
		if cur != nil {
			signal = cur.server.signal
		}
		select {
		case <-ctx.Done():
			return "", nil

		case reply := <-r.ping:
			close(reply)

		case <-signal:
			getInfos, last := cur.server.snapshot()
			if getInfos > 0 {
				silence.stop()
				if r.Status().Stage == StageWaitingForKubelet && last == nil {
					r.setStage(StageWaitingForKubelet, "GetInfo answered, waiting for the kubelet's NotifyRegistrationStatus")
				}
			}
			if last == nil || last == handled {
				continue
			}
			handled = last
			if last.PluginRegistered {
				retry.reset()
				retryAt.stop()
				r.setStage(StageRegistered, "")
				log.Info("kubelet confirmed the registration", "outcome", "registered")
				continue
			}
			d := scheduleRetry("rejected")
			r.setStage(StageRejected, last.Error)
			log.Error("kubelet rejected the registration", "outcome", "rejected", "kubeletError", last.Error,
				"retryIn", d, "check", "the kubelet log (RegisterPlugin error), the driver's NodeGetInfo answer, and Node labels that collide with its topology")

		case <-retryAt.c():
			retryAt.stop()
			create(retryReason)

		case <-silence.c():
			silence.stop()
			d := scheduleRetry("kubelet-silent")
			log.Warn("no GetInfo from the kubelet; the socket will be re-created", "waited", r.opts.KubeletWait, "retryIn", d,
				"check", "is the kubelet running, and is --plugin-registration-path its plugins_registry directory?")

		case <-recheck.c():
			recheck.stop()
			newName, err := drv.PluginName(ctx)
			if err != nil {
				r.metrics.setReachable(false)
				d := recheckBackoff.next()
				recheck.set(d)
				log.Info("driver not answering GetPluginInfo after it came back", "err", err, "retryIn", d)
				continue
			}
			r.metrics.setReachable(true)
			recheckBackoff.reset()
			if newName == name {
				log.Info("driver came back under the same name", "outcome", "unchanged")
				continue
			}
			if _, err := RegistrationSocketPath(r.opts.PluginRegistrationPath, newName); err != nil {
				return "", fmt.Errorf("the driver at %s now reports a name the kubelet cannot register: %w", r.driverPath, err)
			}
			log.Info("driver came back under another name; registering it instead", "newDriver", newName, "outcome", "renamed")
			return newName, nil

		case err := <-watcher.Errors:
			log.Warn("file watcher error", "err", err)

		case ev, ok := <-watcher.Events:
			if !ok {
				return "", errors.New("file watcher closed")
			}
			switch filepath.Clean(ev.Name) {
			case r.driverPath:
				if ev.Has(fsnotify.Create) {
					drv.ResetBackoff()
					if r.opts.DriverName == "" {
						recheckBackoff.reset()
						recheck.set(0)
					}
					log.Info("driver socket created again; the driver restarted")
				}
			case path:
				if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Create) {
					continue
				}
				if cur == nil {
					if r.Status().Stage == StageSocketConflict && ev.Has(fsnotify.Remove) {
						create("conflict") // the path was freed: try now
					}
					continue
				}
				if cur.sock.Owned() {
					continue // an event about a socket of ours that is gone already
				}
				if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
					log.Warn("registration socket was deleted; re-creating it", "outcome", "recreating")
					create("deleted")
					continue
				}
				// Somebody else's file is at the path now: do not fight for it.
				r.stopSocket(log, cur, "replaced")
				cur = nil
				d := scheduleRetry("conflict")
				r.setStage(StageSocketConflict, fmt.Sprintf("%s was replaced by another process's file", path))
				log.Error("registration socket replaced by another file; not touching it", "outcome", "conflict", "retryIn", d)
			}
		}
	}
}

// stopSocket stops serving cur and removes its file if it still is ours.
func (r *Registrar) stopSocket(log *slog.Logger, cur *servingSocket, reason string) {
	if cur.stop() {
		log.Info("registration socket removed", "reason", reason, "outcome", "removed")
	} else {
		log.Info("registration socket closed; the file at its path is not ours, left in place", "reason", reason, "outcome", "kept")
	}
}

// Handler returns the HTTP handler for /healthz, /readyz and /metrics, for a
// program that serves them on its own server instead of Options.HTTPEndpoint.
func (r *Registrar) Handler() http.Handler { return r.handler() }
