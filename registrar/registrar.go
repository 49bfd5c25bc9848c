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
//
// Errors are values: an *OptionError names the option, its value, what was
// attempted with it, the cause and the fix, and a program that sets options
// from flags names the flag instead with OptionError.Describe. A value that
// breaks a rule is a *csiplugin.ValidationError (inside the *OptionError of
// its option, except the driver's name); a driver that did not answer in
// time is a *DriverTimeoutError inside the *OptionError of
// ConnectionTimeout.
package registrar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
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

	// reregister carries Reregister's requests to the control loop (nodehook.go).
	reregister chan reregisterRequest

	// The control loop's dependencies: the real ones unless a test of this
	// package sets them (export_test.go) before Run.
	clock      clock
	newWatcher func() (*fsnotify.Watcher, error)
}

// New checks opts and returns a Registrar. Its errors mean a value breaks
// a rule, and nothing has been created: an *OptionError wrapping a
// *csiplugin.ValidationError, or with DriverName, a bare
// *csiplugin.ValidationError of the driver name or of the registration
// socket path it makes.
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
		reregister: make(chan reregisterRequest),
	}, nil
}

// Status returns the current registration status.
func (r *Registrar) Status() Status { return r.status.get() }

// errRunTwice is returned by a second call of Run.
var errRunTwice = errors.New("registrar: Run was called twice; a Registrar runs once, create another with New")

// Run registers the driver and keeps it registered until ctx ends, then stops
// serving and removes the registration socket if it still is the one this
// Registrar created. After Run returns the status is StageStopped. Run may be
// called once.
//
// Run returns nil when ctx ends. Otherwise it returns:
//   - an *OptionError when acting on an option failed: HTTPEndpoint cannot be
//     listened on; the directory of CSIAddress or PluginRegistrationPath
//     cannot be watched; CSIAddress cannot be inspected or is not a socket;
//     or the driver did not answer within ConnectionTimeout (its Err is a
//     *DriverTimeoutError);
//   - an error wrapping a *csiplugin.ValidationError when the driver
//     reports a name the kubelet cannot register;
//   - the driver's error when GetPluginInfo or Probe fails in a way waiting
//     does not cure (e.g. codes.Unimplemented);
//   - other errors when the file watcher cannot start or stops, the gRPC
//     client of the driver cannot be created, or Run is called a second
//     time.
func (r *Registrar) Run(ctx context.Context) (err error) {
	if !r.started.CompareAndSwap(false, true) {
		return errRunTwice
	}
	defer close(r.exited)
	defer r.keepStateFile()() // after StageStopped below: removes the file
	defer func() {
		detail := ""
		if err != nil {
			detail = err.Error()
		}
		now := r.clock.Now()
		r.status.update(func(st *Status) { st.Stage, st.Detail, st.Since = StageStopped, detail, now })
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
		return &OptionError{Option: OptionCSIAddress, Value: r.driverPath, Op: "watch the directory of", Path: filepath.Dir(r.driverPath),
			Err: err, Fix: "check the volume mount of that directory"}
	}
	if r.opts.RollingUpdate != "" {
		return r.runHandover(ctx, drv, watcher)
	}
	return r.newLoop(drv, watcher).run(ctx)
}

// identify returns the name to register and its registration socket's
// path: Options.DriverName (checked by New) once the driver answers Probe,
// or the name GetPluginInfo reports, checked here.
func (r *Registrar) identify(ctx context.Context, drv *driverClient) (name, path string, err error) {
	if r.opts.DriverName != "" {
		if err := drv.Probe(ctx); err != nil {
			return "", "", err
		}
		return r.opts.DriverName, r.opts.regPath, nil
	}
	name, err = drv.PluginName(ctx)
	if err != nil {
		return "", "", err
	}
	path, err = csiplugin.RegistrationSocketPath(r.opts.PluginRegistrationPath, name)
	if err != nil {
		return "", "", fmt.Errorf("the driver at %s reported a name the kubelet cannot register: %w", r.driverPath, err)
	}
	return name, path, nil
}

// Handler returns the HTTP handler for /healthz, /readyz and /metrics, for a
// program that serves them on its own server instead of Options.HTTPEndpoint.
func (r *Registrar) Handler() http.Handler { return r.handler() }
