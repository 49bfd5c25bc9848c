package stubdriver

import (
	"context"
	"log/slog"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// registrarOptions returns Options.Register completed with what the driver
// knows: its socket and its name. Conflicting values are refused rather than
// overridden.
func (d *Driver) registrarOptions() (registrar.Options, error) {
	ro := *d.opts.Register
	if ro.CSIAddress != "" {
		if p, err := csiplugin.ParseEndpoint(ro.CSIAddress); err != nil || p != d.path {
			return ro, &csiplugin.ValidationError{What: "Register.CSIAddress", Value: ro.CSIAddress,
				Rule: "must be empty or the driver's own endpoint " + d.path, Fix: "leave it empty: the driver sets it"}
		}
	}
	if ro.DriverName != "" && ro.DriverName != d.opts.Name {
		return ro, &csiplugin.ValidationError{What: "Register.DriverName", Value: ro.DriverName,
			Rule: "must be empty or the driver's own name " + d.opts.Name, Fix: "leave it empty: the driver sets it"}
	}
	ro.CSIAddress = d.path
	// The name is known: the registrar only waits for Probe, and does not
	// watch for a rename that cannot happen in one process.
	ro.DriverName = d.opts.Name
	if ro.Logger == nil {
		ro.Logger = d.opts.Logger
	}
	return ro, nil
}

// registration is a registrar running inside Run. The zero value is "no
// registration": done is nil (never ready in a select) and stop does nothing.
type registration struct {
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan error // Run's result; nil once consumed
}

// startRegistration starts the registrar if Options.Register asks for one.
// Its goroutine is owned by the returned registration: stop ends it and waits.
func (d *Driver) startRegistration(ctx context.Context) (*registration, error) {
	if d.opts.Register == nil {
		return &registration{}, nil
	}
	r := d.registrar
	rctx, cancel := context.WithCancel(ctx)
	reg := &registration{log: d.log, cancel: cancel, done: make(chan error, 1)}
	go func() { reg.done <- r.Run(rctx) }()
	d.log.Info("in-process registration started", "kubeletRegistrationPath", d.opts.Register.KubeletRegistrationPath,
		"pluginRegistrationPath", d.opts.Register.PluginRegistrationPath, "outcome", "registering")
	return reg, nil
}

// stop ends the registrar (it removes its registration socket) and waits for
// it. An error it returns on the way out is logged: the caller already has
// the reason it stopped.
func (r *registration) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	if r.done != nil {
		if err := <-r.done; err != nil {
			r.log.Warn("in-process registrar stopped with an error", "err", err)
		}
		r.done = nil
	}
}
