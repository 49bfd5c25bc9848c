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

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/sockfile"
	"github.com/fsnotify/fsnotify"
)

// Registrar registers one CSI driver with the kubelet. Create it with New.
type Registrar struct {
	opts       config
	log        *slog.Logger
	driverPath string
	status     statusBox
	metrics    *metrics
	ping       chan chan struct{} // liveness: the control loop closes what it receives
	exited     chan struct{}      // closed when Run returns
	started    atomic.Bool        // Run was called
	driver     *driverClient      // set by Run before any HTTP request can reach it
	httpLimits httpLimits

	// The control loop's dependencies: the real ones unless a test of this
	// package sets them (export_test.go) before Run.
	clock      clock
	newWatcher func() (*fsnotify.Watcher, error)
}

// New checks opts and returns a Registrar. An *OptionError wrapping a
// *csiplugin.ValidationError means an option is wrong; nothing has been
// created.
func New(opts Options) (*Registrar, error) {
	cfg, err := opts.validate()
	if err != nil {
		return nil, err
	}
	return &Registrar{
		opts:       cfg,
		log:        cfg.Logger.With("csiAddress", cfg.driverPath),
		driverPath: cfg.driverPath,
		metrics:    newMetrics(cfg.Version),
		ping:       make(chan chan struct{}),
		exited:     make(chan struct{}),
		clock:      realClock{},
		httpLimits: defaultHTTPLimits,
		newWatcher: fsnotify.NewWatcher,
	}, nil
}

// Status returns the current registration status.
func (r *Registrar) Status() Status { return r.status.get() }

func (r *Registrar) setStage(s Stage, detail string) {
	r.status.update(func(st *Status) {
		if st.Stage != s {
			st.Since = r.clock.Now()
		}
		st.Stage, st.Detail = s, detail
	})
}

// errRunTwice is returned by a second call of Run.
var errRunTwice = errors.New("registrar: Run was called twice; a Registrar runs once, create another with New")

// Run registers the driver and keeps it registered until ctx ends, then stops
// serving and removes the registration socket if it still is the one this
// Registrar created. It returns nil when ctx ends, a *csiplugin.ValidationError when the
// driver reports an invalid name, and other errors when the driver cannot be
// reached within ConnectionTimeout or a directory cannot be watched. After Run
// returns the status is StageStopped. Run may be called once.
func (r *Registrar) Run(ctx context.Context) (err error) {
	if !r.started.CompareAndSwap(false, true) {
		return errRunTwice
	}
	defer close(r.exited)
	defer func() {
		detail := ""
		if err != nil {
			detail = err.Error()
		}
		r.setStage(StageStopped, detail)
	}()
	watcher, err := r.newWatcher()
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
		return optionFailed(OptionCSIAddress, "watch "+filepath.Dir(r.driverPath)+", the directory of the driver socket "+r.driverPath+
			": %[2]v; check the volume mount of %[1]s", err)
	}
	name, err := r.waitForDriver(ctx, watcher, drv)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := watcher.Add(r.opts.PluginRegistrationPath); err != nil {
		return optionFailed(OptionPluginRegistrationPath, "watch %[1]s "+r.opts.PluginRegistrationPath+
			": %[2]v; mount the kubelet's plugins_registry there", err)
	}
	for {
		s, err := r.newSession(drv, watcher, name)
		if err != nil {
			return err
		}
		renamed, err := s.run(ctx)
		if err != nil || renamed == "" {
			return err
		}
		name = renamed
	}
}

// waitForDriver waits until the driver socket exists and the driver answers,
// and returns the validated driver name. It wakes on file events in the
// socket's directory, not on a polling interval; only a socket that exists
// but refuses is retried with a short backoff. A look every reconcilePeriod
// (and at once after a file watcher error) catches an event the watcher lost.
func (r *Registrar) waitForDriver(ctx context.Context, watcher *fsnotify.Watcher, drv *driverClient) (string, error) {
	start := r.clock.Now()
	r.setStage(StageWaitingForDriver, "connecting to "+r.driverPath)
	deadline, progress, retryAt, recheck := newAlarm(r.clock), newAlarm(r.clock), newAlarm(r.clock), newAlarm(r.clock)
	defer func() { deadline.stop(); progress.stop(); retryAt.stop(); recheck.stop() }()
	if r.opts.ConnectionTimeout > 0 {
		deadline.set(r.opts.ConnectionTimeout)
	}
	const progressEvery = 10 * time.Second // a log line only; waking is event-driven
	progress.set(progressEvery)
	retry := newBackoff(10*time.Millisecond, time.Second)
	var lastErr error
	for {
		r.log.Debug("looking at the driver socket", "socket", r.driverPath)
		st, err := os.Stat(r.driverPath)
		switch {
		case err == nil && st.Mode().Type() == fs.ModeSocket:
			name, err := r.identify(ctx, drv)
			if err == nil {
				r.metrics.setReachable(true)
				r.log.Info("driver answered", "driver", name, "socket", r.driverPath, "outcome", "answered",
					"waited", r.clock.Now().Sub(start).Round(time.Millisecond))
				return name, nil
			}
			if !retryable(err) {
				return "", err
			}
			lastErr = err
			retryAt.set(retry.next())
		case err == nil:
			return "", optionFailed(OptionCSIAddress, "%[1]s "+r.driverPath+" is a %[2]v, not a socket: point %[1]s at the socket the CSI driver listens on",
				errors.New(sockfile.FileKind(st.Mode())))
		case errors.Is(err, fs.ErrNotExist):
			lastErr = errors.New("socket does not exist yet")
		default:
			return "", optionFailed(OptionCSIAddress, "inspect %[1]s "+r.driverPath+": %[2]v", err)
		}
		r.metrics.setReachable(false)
		recheck.set(reconcilePeriod)
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
			case err, ok := <-watcher.Errors:
				if !ok {
					return "", errors.New("file watcher closed")
				}
				r.log.Warn("file watcher error; looking at the driver socket again", "err", err, "socket", r.driverPath, "outcome", "rechecking")
				break wait
			case <-retryAt.c():
				retryAt.stop()
				break wait
			case <-recheck.c():
				recheck.stop()
				break wait
			case <-progress.c():
				progress.set(progressEvery)
				r.log.Info("still waiting for the CSI driver", "waited", r.clock.Now().Sub(start).Round(time.Second),
					"lastError", lastErr.Error(), "check", "is the driver container running and listening on this socket?")
			case <-deadline.c():
				return "", optionFailed(OptionConnectionTimeout, fmt.Sprintf("the CSI driver at %s did not answer within %%[1]s=%s (waited %s): %%[2]v",
					r.driverPath, r.opts.ConnectionTimeout, r.clock.Now().Sub(start).Round(time.Millisecond)), lastErr)
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
	if _, err := csiplugin.RegistrationSocketPath(r.opts.PluginRegistrationPath, name); err != nil {
		return "", fmt.Errorf("the driver at %s reported a name the kubelet cannot register: %w", r.driverPath, err)
	}
	return name, nil
}

// Handler returns the HTTP handler for /healthz, /readyz and /metrics, for a
// program that serves them on its own server instead of Options.HTTPEndpoint.
func (r *Registrar) Handler() http.Handler { return r.handler() }
