// Package stubdriver is a minimal CSI node driver that does one real thing:
// it serves CSI ephemeral (inline) volumes, each a directory under a state
// directory bind-mounted into the pod. It answers everything the kubelet and
// csi-sanity ask of a node-only driver, can register itself with the kubelet
// in the same process (Options.Register), and is the template a new driver
// starts from (see GUIDE.md next to this file):
//
//   - driver.go          options, validation, serving the CSI socket
//   - registration.go    optional in-process registration with the kubelet
//   - identityserver.go  GetPluginInfo, GetPluginCapabilities, Probe
//   - nodeserver.go      NodeGetInfo, NodeGetCapabilities, NodePublishVolume, NodeUnpublishVolume
//   - volumes.go         the ephemeral volumes: directories, publish, unpublish
//   - targets.go         the target paths publish accepts and unpublish touches
//   - mounter.go         bind mounts (k8s.io/mount-utils, mount(2) without a mount binary)
//   - topology.go        --topology parsing and the kubelet's label rules
//
// k8s.io/mount-utils logs through k8s.io/klog/v2. A program that wants one log
// format routes klog into its slog logger once, in main (klog.SetSlogLogger);
// this package never touches klog's global settings.
//
// Errors are values. An option whose value is wrong, or that cannot be acted
// on, is reported as the registrar's: a *registrar.OptionError naming the
// field (OptionEndpoint, OptionStateDir, …), so a program names its own flag
// with Describe as it does for registrar.Options. The node's identity (Name,
// NodeID, Topology) and ParseTopology's arguments are checked by the
// kubelet's rules and refused with a bare *csiplugin.ValidationError.
// Errors of the CSI calls are gRPC statuses with the CSI spec's codes.
package stubdriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/grpcserve"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// DefaultName is the driver name used when Options.Name is empty.
const DefaultName = "stub.csi.example.com"

// Options configure a Driver.
type Options struct {
	// Endpoint is the socket to serve: a unix:// URL or a path.
	Endpoint string
	// Name is reported by GetPluginInfo. Default DefaultName.
	Name string
	// VendorVersion is reported by GetPluginInfo.
	VendorVersion string
	// NodeID is reported by NodeGetInfo; the kubelet writes it to the Node
	// annotation and CSINode. Required, at most 192 bytes.
	NodeID string
	// MaxVolumesPerNode is reported by NodeGetInfo; 0 means not set.
	MaxVolumesPerNode int64
	// Topology is the node's accessible topology (label key → value). When it
	// is not empty the driver advertises VOLUME_ACCESSIBILITY_CONSTRAINTS.
	Topology map[string]string
	// StateDir is the directory holding one directory per ephemeral volume.
	// Run creates it if needed and sets its mode to 0750: the volumes' own
	// directories are world-writable, as emptyDir volumes are, and must be
	// reachable through their pods only. It must be absolute. Empty means no
	// volumes: NodePublishVolume answers FAILED_PRECONDITION.
	//
	// In a pod it is a hostPath: the data must outlive a restart of the
	// driver's container, and the bind mounts made from it must be visible to
	// the kubelet (see manifests/base/daemonset.yaml).
	StateDir string
	// KubeletPodsDir is the kubelet's pods directory, as this process sees
	// it: NodePublishVolume refuses a target_path that does not resolve
	// below it. Default DefaultKubeletPodsDir.
	KubeletPodsDir string
	// Register, when not nil, makes Run also register the driver with the
	// kubelet, in this process, as the `csi-registrar register` sidecar does:
	// Run serves the CSI socket first, then runs a registrar.Registrar with
	// these options, and stops it before it stops serving. CSIAddress and
	// DriverName are the driver's own (Endpoint and Name) and must be left
	// empty; Logger defaults to the driver's.
	Register *registrar.Options
	// ShutdownDelay, when positive, keeps the CSI socket served this long
	// after ctx ends (and after an in-process registrar stopped), before the
	// graceful stop. In a rollout with the rolling-update mode the kubelet
	// may still call this endpoint for a moment: an announcement it is
	// registering when the pod is deleted (its NodeGetInfo failing would make
	// the kubelet unregister the driver), or a call in flight while the next
	// instance takes over. Keep it under the pod's termination grace period.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds how long Run, once ctx ends, lets running calls
	// (a publish that is mounting) finish before it cancels them and closes
	// their connections. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives one line per served socket event and per published
	// volume. Default slog.Default().
	Logger *slog.Logger
}

// The fields of Options an error can name (registrar.OptionShutdownTimeout
// names ShutdownTimeout).
const (
	OptionShutdownDelay     registrar.Option = "ShutdownDelay"
	OptionEndpoint          registrar.Option = "Endpoint"
	OptionMaxVolumesPerNode registrar.Option = "MaxVolumesPerNode"
	OptionStateDir          registrar.Option = "StateDir"
	OptionKubeletPodsDir    registrar.Option = "KubeletPodsDir"
)

// invalid returns the error for the option opt's value v breaking rule.
func invalid(opt registrar.Option, v, rule, fix string) error {
	return &registrar.OptionError{Option: opt, Value: v, Err: &csiplugin.ValidationError{What: "Options." + string(opt), Value: v, Rule: rule, Fix: fix}}
}

// DefaultShutdownTimeout is Options.ShutdownTimeout's default.
const DefaultShutdownTimeout = 5 * time.Second

// Driver serves the CSI Identity and Node services.
type Driver struct {
	opts Options
	log  *slog.Logger
	path string
	vols *volumes // nil without Options.StateDir
	// registrar, with Options.Register, is built (and its options checked)
	// by New and run by Run.
	registrar *registrar.Registrar
}

// New checks opts and returns a Driver. Every error means a value breaks a
// rule, and errors.As finds a *csiplugin.ValidationError in it:
//   - a *registrar.OptionError for Endpoint, MaxVolumesPerNode, StateDir,
//     KubeletPodsDir, ShutdownDelay and ShutdownTimeout (as
//     registrar.OptionShutdownTimeout);
//   - a *csiplugin.ValidationError for Name, NodeID, Topology, and for
//     Register.CSIAddress or Register.DriverName set to another driver's;
//   - registrar.New's errors for the other options of Register.
func New(opts Options) (*Driver, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.ShutdownTimeout < 0 {
		return nil, invalid(registrar.OptionShutdownTimeout, opts.ShutdownTimeout.String(), "must not be negative", "use a duration such as 5s")
	}
	if opts.ShutdownDelay < 0 {
		return nil, invalid(OptionShutdownDelay, opts.ShutdownDelay.String(), "must not be negative", "use 0 to stop at once, or a duration such as 5s")
	}
	path, err := csiplugin.ParseEndpoint(opts.Endpoint)
	if err != nil {
		var ve *csiplugin.ValidationError
		if errors.As(err, &ve) {
			return nil, invalid(OptionEndpoint, ve.Value, ve.Rule, ve.Fix)
		}
		return nil, err
	}
	if err := csiplugin.ValidateDriverName(opts.Name); err != nil {
		return nil, err
	}
	if err := validateNodeID(opts.NodeID); err != nil {
		return nil, err
	}
	if opts.MaxVolumesPerNode < 0 {
		return nil, invalid(OptionMaxVolumesPerNode, fmt.Sprint(opts.MaxVolumesPerNode), "must not be negative", "use 0 for no limit")
	}
	for k, v := range opts.Topology {
		if err := validateTopology(k, v); err != nil {
			return nil, err
		}
	}
	// Keep a copy: the caller's map may change after New, and the driver must
	// serve the topology that was validated (without racing with the caller).
	opts.Topology = maps.Clone(opts.Topology)
	d := &Driver{opts: opts, path: path, log: opts.Logger.With("driver", opts.Name, "socket", path)}
	if opts.StateDir != "" {
		if !filepath.IsAbs(opts.StateDir) {
			return nil, invalid(OptionStateDir, opts.StateDir, "must be an absolute path", "e.g. /var/lib/csi-registrar/"+opts.Name)
		}
		if opts.KubeletPodsDir == "" {
			opts.KubeletPodsDir = DefaultKubeletPodsDir
		}
		if !filepath.IsAbs(opts.KubeletPodsDir) {
			return nil, invalid(OptionKubeletPodsDir, opts.KubeletPodsDir, "must be an absolute path",
				"use the kubelet's --root-dir followed by /pods, e.g. "+DefaultKubeletPodsDir)
		}
		d.opts.KubeletPodsDir = opts.KubeletPodsDir
		d.vols = newVolumes(filepath.Clean(opts.StateDir), filepath.Clean(opts.KubeletPodsDir), d.log)
	}
	if opts.Register != nil {
		ro, err := d.registrarOptions()
		if err != nil {
			return nil, err
		}
		if d.registrar, err = registrar.New(ro); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func validateNodeID(id string) error {
	return csiplugin.ValidateNodeID(id, "pass --node-id=$(KUBE_NODE_NAME) with KUBE_NODE_NAME from the downward API (spec.nodeName)")
}

// Run serves the CSI socket until ctx ends, then stops gracefully and removes
// the socket. A stale socket at the path is replaced; a live one, or a file
// that is not a socket, is an error and is left alone.
//
// Run's errors: a *registrar.OptionError of OptionStateDir when the state
// directory cannot be created or its mode set; a *sockfile.ListenError when
// the socket cannot be created; an error wrapping the gRPC server's when it
// stops serving; and, with Options.Register, an error wrapping the
// registrar's Run error.
//
// With Options.Register, Run registers the driver with the kubelet once the
// CSI socket is listening, and on the way out removes the registration
// socket before the CSI socket: the kubelet never sees a registered driver
// that does not answer. If the registrar fails (e.g. it cannot watch its
// directory), Run stops serving and returns the registrar's error.
func (d *Driver) Run(ctx context.Context) error {
	if d.vols != nil {
		if err := d.vols.init(); err != nil {
			return err
		}
	}
	sock, err := sockfile.Listen(d.path)
	if err != nil {
		return err
	}
	srv := grpcserve.NewServer()
	csi.RegisterIdentityServer(srv, &identityServer{opts: &d.opts})
	csi.RegisterNodeServer(srv, &nodeServer{opts: &d.opts, vols: d.vols})
	serving := grpcserve.Serve(srv, sock.Listener())
	d.log.Info("CSI driver serving", "nodeID", d.opts.NodeID, "stateDir", d.opts.StateDir, "outcome", "serving")

	// The registrar starts only now that the socket listens: its first
	// GetPluginInfo or Probe is answered at once.
	reg, err := d.startRegistration(ctx)
	if err == nil {
		select {
		case <-ctx.Done():
		case <-serving.Done():
			err = fmt.Errorf("serve %s: %w", d.path, serving.Err())
		case err = <-reg.done:
			reg.done = nil // consumed
			if err != nil {
				err = fmt.Errorf("in-process registration: %w", err)
			}
		}
	}
	reg.stop()
	if err == nil && d.opts.ShutdownDelay > 0 {
		d.log.Info("still serving before stopping", "shutdownDelay", d.opts.ShutdownDelay, "outcome", "draining")
		select {
		case <-time.After(d.opts.ShutdownDelay):
		case <-serving.Done():
		}
	}
	serving.Stop(d.opts.ShutdownTimeout)
	if sock.Close() {
		d.log.Info("CSI driver stopped; socket removed", "outcome", "removed")
	} else {
		d.log.Info("CSI driver stopped; the file at the socket path is not ours, left in place", "outcome", "kept")
	}
	return err
}
