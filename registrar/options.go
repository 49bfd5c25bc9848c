package registrar

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Options configure a Registrar. The zero value of a duration means its default.
type Options struct {
	// CSIAddress is the driver's socket as this process sees it: a path or a
	// unix:// URL. Default /run/csi/socket.
	CSIAddress string
	// KubeletRegistrationPath is the driver's socket path on the host, which
	// the kubelet dials (GetInfo's Endpoint). Required; absolute and clean.
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
	// RollingUpdate, the UID of this instance's pod (from the downward API),
	// turns on the handover (docs/design.md, "The handover"): two instances
	// of the driver on one node (a DaemonSet rolling with maxSurge) share one
	// registration socket at the plain path, whose listening descriptor
	// passes from pod to pod, and the endpoint csi-endpoint.sock, a link in
	// the directory of the driver's socket swapped to the newest instance
	// whose driver answers. The kubelet sees no file event during a rollout.
	// CSIAddress and KubeletRegistrationPath must name the same socket (same
	// base name), this pod's own. docs/operating.md, "Rolling updates", says
	// how to opt in.
	RollingUpdate string
	// ReadyCheck, if set, is asked by /readyz once the registration is
	// confirmed and the driver answers: an error makes it answer 503 with
	// the error's text (registrar/nodestatus reports a CSINode loss it could
	// not heal this way). It must return quickly. Not part of the options'
	// JSON form (a registrar in a child process of the in-process tests).
	ReadyCheck func() error `json:"-"`
	// StateFile, if set, is a file the Registrar keeps while it runs with
	// what ProbeState needs of its Status (csi-registrar register's
	// --mode=kubelet-registration-probe); absolute, not under
	// PluginRegistrationPath. csi-registrar register uses DefaultStateFile.
	StateFile string
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
	// DefaultShutdownTimeout: the registrar's own gRPC handlers answer in
	// microseconds; what it bounds is a client that does not finish its call.
	DefaultShutdownTimeout = time.Second
)

// Lower bounds of the durations in Options. Below them the registrar does
// not work better, it churns: each bound says why.
const (
	// MinTimeout: a call to a local driver over a unix socket takes
	// milliseconds, but a node under load stalls processes for tens of
	// milliseconds; below this a healthy driver fails Probe.
	MinTimeout = 100 * time.Millisecond
	// MinConnectionTimeout (unless 0, wait forever): a driver container
	// needs at least this long to start and create its socket.
	MinConnectionTimeout = time.Second
	// MinKubeletWait: the kubelet's plugin manager reconciles every second
	// and registers plugins one at a time; re-creating the socket sooner than
	// several of its rounds interrupts a registration in progress.
	MinKubeletWait = 10 * time.Second
	// MinRegistrationRetryMax: the backoff starts at 1 s; a cap below its
	// first step would re-create the socket in a busy loop.
	MinRegistrationRetryMax = time.Second
)

// Option names a field of Options (or of a library's options built on the
// same error, e.g. stubdriver's), as an *OptionError reports it.
type Option string

// The fields of Options.
const (
	OptionCSIAddress              = Option("CSIAddress")
	OptionKubeletRegistrationPath = Option("KubeletRegistrationPath")
	OptionPluginRegistrationPath  = Option("PluginRegistrationPath")
	OptionDriverName              = Option("DriverName")
	OptionTimeout                 = Option("Timeout")
	OptionConnectionTimeout       = Option("ConnectionTimeout")
	OptionKubeletWait             = Option("KubeletWait")
	OptionRegistrationRetryMax    = Option("RegistrationRetryMax")
	OptionHTTPEndpoint            = Option("HTTPEndpoint")
	OptionShutdownTimeout         = Option("ShutdownTimeout")
	OptionRollingUpdate           = Option("RollingUpdate")
)

// config is Options validated once, with defaults applied and what follows
// from them derived: the one value the rest of the package reads.
type config struct {
	Options
	driverPath string // CSIAddress as a clean file system path
	regPath    string // with DriverName: its registration socket's path
}

// validate applies the defaults and checks every option, once. Errors are
// *OptionError; nothing has been created.
func (o Options) validate() (config, error) {
	if o.CSIAddress == "" {
		o.CSIAddress = DefaultCSIAddress
	}
	if o.PluginRegistrationPath == "" {
		o.PluginRegistrationPath = DefaultPluginRegistrationPath
	}
	o.PluginRegistrationPath = filepath.Clean(o.PluginRegistrationPath)
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.KubeletWait == 0 {
		o.KubeletWait = DefaultKubeletWait
	}
	if o.RegistrationRetryMax == 0 {
		o.RegistrationRetryMax = DefaultRegistrationRetryMax
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for _, d := range []struct {
		opt  Option
		v    time.Duration
		min  time.Duration
		zero bool // 0 is allowed and means "no limit"
	}{
		{OptionTimeout, o.Timeout, MinTimeout, false},
		{OptionConnectionTimeout, o.ConnectionTimeout, MinConnectionTimeout, true},
		{OptionKubeletWait, o.KubeletWait, MinKubeletWait, false},
		{OptionRegistrationRetryMax, o.RegistrationRetryMax, MinRegistrationRetryMax, false},
		{OptionShutdownTimeout, o.ShutdownTimeout, 0, false},
	} {
		switch {
		case d.v < 0:
			return config{}, invalid(d.opt, d.v.String(), "must not be negative", "use a duration such as 1s or 2m")
		case d.v == 0 && d.zero:
		case d.v < d.min:
			rule := fmt.Sprintf("must be at least %s", d.min)
			if d.zero {
				rule += " (or 0 for no limit)"
			}
			return config{}, invalid(d.opt, d.v.String(), rule,
				fmt.Sprintf("use %s or more; shorter values make the registrar churn, not react faster", d.min))
		}
	}
	if err := checkHTTPEndpoint(o.HTTPEndpoint); err != nil {
		return config{}, err
	}
	if err := checkStateFile(o.StateFile, o.PluginRegistrationPath); err != nil {
		return config{}, err
	}
	path, err := csiplugin.ParseEndpoint(o.CSIAddress)
	if err != nil {
		return config{}, ruleOf(OptionCSIAddress, err)
	}
	if err := csiplugin.ValidateHostSocketPath("Options.KubeletRegistrationPath", o.KubeletRegistrationPath); err != nil {
		return config{}, ruleOf(OptionKubeletRegistrationPath, err)
	}
	if o.RollingUpdate != "" {
		if err := csiplugin.ValidatePodUID(o.RollingUpdate); err != nil {
			return config{}, ruleOf(OptionRollingUpdate, err)
		}
		if err := checkHandover(o, path); err != nil {
			return config{}, err
		}
	}
	var regPath string
	if o.DriverName != "" {
		// Checks the name and that its socket path fits.
		if regPath, err = csiplugin.RegistrationSocketPath(o.PluginRegistrationPath, o.DriverName); err != nil {
			return config{}, err
		}
	}
	return config{Options: o, driverPath: filepath.Clean(path), regPath: regPath}, nil
}

// checkHandover checks what the handover needs of the paths: a driver
// socket whose name is the same in this container (CSIAddress) and on the
// host (KubeletRegistrationPath), since the endpoint link beside it names
// it relative to both.
func checkHandover(o Options, driverPath string) error {
	own, host := filepath.Base(driverPath), filepath.Base(o.KubeletRegistrationPath)
	switch {
	case own != host:
		return invalid(OptionRollingUpdate, o.RollingUpdate, fmt.Sprintf("needs the driver's socket to have one name in this container and on the host, but CSIAddress is %s and KubeletRegistrationPath is %s", own, host),
			"mount the driver's socket directory so that both name the same file, e.g. --csi-address=/csi/$(POD_UID).sock and --kubelet-registration-path=/var/lib/kubelet/plugins/<driver>/$(POD_UID).sock")
	case own == handoverLink || own == handoverRendezvous || own == handoverLock:
		return invalid(OptionRollingUpdate, o.RollingUpdate, fmt.Sprintf("needs a driver socket not named %s, which the handover keeps in its directory", own),
			"name the driver's socket after the pod, e.g. /csi/$(POD_UID).sock")
	}
	return nil
}

// checkHTTPEndpoint checks that a non-empty endpoint is host:port with a
// numeric port, as net.Listen("tcp") takes it.
func checkHTTPEndpoint(ep string) error {
	if ep == "" {
		return nil
	}
	bad := func(rule string) error {
		return invalid(OptionHTTPEndpoint, ep, rule, "use host:port or :port, e.g. :9809 or 127.0.0.1:9809")
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return bad("must be a TCP address host:port")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return bad(fmt.Sprintf("has port %q; the port must be a number from 0 to 65535", port))
	}
	if host != "" && net.ParseIP(host) == nil && !validHostName(host) {
		return bad(fmt.Sprintf("has host %q, which is neither an IP address nor a host name", host))
	}
	return nil
}

// validHostName reports whether h looks like a DNS name (letters, digits,
// '-' and '.'); whether it resolves is up to net.Listen.
func validHostName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !csiplugin.IsAlnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
