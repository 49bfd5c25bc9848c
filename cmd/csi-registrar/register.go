package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/nodestatus"
)

// envPrefix is the only prefix of environment variables csi-registrar reads;
// probe reads probeEnvPrefix, a prefix of its own, so that the variables of
// the container it runs in (its --timeout is 1s in register and 3s in probe)
// do not change it.
const (
	envPrefix      = "CSI_REGISTRAR_"
	probeEnvPrefix = envPrefix + "PROBE_"
)

// env names the environment variable for a flag of register and driver:
// --csi-address → CSI_REGISTRAR_CSI_ADDRESS.
func env(flag string) []string { return []string{envPrefix + envName(flag)} }

// probeEnv names the environment variable for a flag of probe:
// --csi-address → CSI_REGISTRAR_PROBE_CSI_ADDRESS.
func probeEnv(flag string) []string { return []string{probeEnvPrefix + envName(flag)} }

// envName is flag in upper case with '_' for '-'.
func envName(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

const (
	modeRegistration = "registration"
	modeProbe        = "kubelet-registration-probe"
)

func registerCommand(run func(context.Context, registrar.Options, nodestatus.Options) error) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "csi-address", Value: registrar.DefaultCSIAddress, EnvVars: env("csi-address"),
			Usage: "the CSI driver's socket in this container: a path or unix:// URL"},
	}
	flags = append(flags, kubeletFlags("", "required")...)
	flags = append(flags,
		&cli.StringFlag{Name: "driver-name", EnvVars: env("driver-name"),
			Usage: "register this name instead of asking the driver's GetPluginInfo (the driver must still answer Probe)"},
		&cli.DurationFlag{Name: "timeout", Value: registrar.DefaultTimeout, EnvVars: env("timeout"),
			Usage: "timeout of each call to the driver (GetPluginInfo, Probe)"},
		&cli.DurationFlag{Name: "connection-timeout", EnvVars: env("connection-timeout"),
			Usage: "how long to wait for the driver at start before exiting with an error; 0 waits forever (a no-op upstream)"},
		&cli.IntFlag{Name: "health-port", EnvVars: env("health-port"),
			Usage: "deprecated: same as --http-endpoint=:<port>; 0 or less disables; cannot be combined with --http-endpoint"},
		&cli.StringFlag{Name: "mode", EnvVars: env("mode"),
			Usage: "\"kubelet-registration-probe\" exits 0 only if the registrar running in this container is registered, or stands by in the handover ready to take the registration back (reads --state-file); any other value, or none, runs the registrar"},
		&cli.StringFlag{Name: "state-file", Value: registrar.DefaultStateFile, EnvVars: env("state-file"),
			Usage: "the file where the registrar keeps its state for --mode=kubelet-registration-probe (a path in this container, not under --plugin-registration-path)"},
		&cli.BoolFlag{Name: "automaxprocs", EnvVars: env("automaxprocs"),
			Usage: "accepted for compatibility: the Go runtime already sets GOMAXPROCS from the container's CPU limit"},
		&cli.BoolFlag{Name: "version", Usage: "print the version and exit"},
	)
	flags = append(flags, nodeStatusFlags()...)
	flags = append(flags, loggingFlags()...)
	flags = append(flags, legacyKlogFlags()...)
	return &cli.Command{
		Name:  "register",
		Usage: "register a CSI driver with the kubelet (drop-in for node-driver-registrar)",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				fmt.Fprintln(c.App.Writer, "csi-registrar", version)
				return nil
			}
			log, _, err := commandLogger(c, "csi-address", "plugin-registration-path")
			if err != nil {
				return err
			}
			switch m := c.String("mode"); m {
			case modeProbe:
				return registrationProbe(c)
			case modeRegistration, "":
			default:
				// Upstream registers for every value but the probe mode.
				log.Warn("unknown --mode value: registering, as node-driver-registrar does for any value but kubelet-registration-probe",
					"mode", m, "fix", "drop --mode")
			}
			opts, err := registerOptions(c, log)
			if err != nil {
				return err
			}
			opts.Logger = log
			ns, err := nodeStatusOptions(c)
			if err != nil {
				return err
			}
			logIgnored(c, log, map[string]string{
				"automaxprocs": "the Go runtime sets GOMAXPROCS from the cgroup CPU limit",
			})
			// Catch stop signals before announcing the start: a signal that
			// arrives after the line below always ends in a clean exit.
			ctx, stop := signalContext(c.Context, log)
			defer stop()
			log.Info("starting csi-registrar register", "version", version, "kubeletRegistrationPath", opts.KubeletRegistrationPath,
				"pluginRegistrationPath", opts.PluginRegistrationPath)
			return run(ctx, opts, ns)
		},
	}
}

// registerOptions turns the register flags into registrar.Options.
func registerOptions(c *cli.Context, log *slog.Logger) (registrar.Options, error) {
	endpoint := c.String("http-endpoint")
	switch port := c.Int("health-port"); {
	case port > 65535:
		return registrar.Options{}, badFlag("health-port", strconv.Itoa(port), "must be a TCP port between 1 and 65535, or 0 or less to disable", "prefer --http-endpoint=:9809")
	case port > 0 && endpoint != "":
		return registrar.Options{}, badFlag("health-port", strconv.Itoa(port), "cannot be combined with --http-endpoint="+endpoint, "drop --health-port")
	case port > 0:
		endpoint = ":" + strconv.Itoa(port)
	}
	return registrar.Options{
		CSIAddress:              c.String("csi-address"),
		KubeletRegistrationPath: kubeletRegistrationPath(c, log),
		PluginRegistrationPath:  c.String("plugin-registration-path"),
		DriverName:              c.String("driver-name"),
		Timeout:                 c.Duration("timeout"),
		ConnectionTimeout:       c.Duration("connection-timeout"),
		KubeletWait:             c.Duration("kubelet-wait"),
		RegistrationRetryMax:    c.Duration("registration-retry-max"),
		RollingUpdate:           c.String("rolling-update"),
		StateFile:               c.String("state-file"),
		HTTPEndpoint:            endpoint,
		EnablePprof:             c.Bool("enable-pprof"),
		Version:                 version,
	}, nil
}

// registrationProbe is --mode=kubelet-registration-probe: exit 0 when the
// state file of the registrar running in this container says the kubelet
// confirmed it (or it stands by in the handover as a usable fallback), else
// exit 1 with the reason. The other flags of the probe's
// command line (upstream's charts pass --kubelet-registration-path) are not
// used: the state file, not a socket, says what the registrar is at.
func registrationProbe(c *cli.Context) error {
	state, err := registrar.ProbeState(c.String("state-file"))
	if err != nil {
		var ve *csiplugin.ValidationError
		if errors.As(err, &ve) {
			named := *ve
			named.What = "--state-file"
			return &named
		}
		return cli.Exit(err.Error(), exitError)
	}
	fmt.Fprintln(c.App.Writer, state)
	return nil
}

// kubeletRegistrationPath returns --kubelet-registration-path, with repeated
// and trailing slashes and "." elements removed: charts build it as
// {{kubeletDir}}/plugins/..., which gives "//" when kubeletDir ends with "/",
// and upstream passes such a path on unchanged. The kubelet dials the same
// socket either way, so the clean form is registered and the change logged.
// ".." is left for the library to refuse: removing it lexically can name
// another file than the kernel would when a component is a symlink.
func kubeletRegistrationPath(c *cli.Context, log *slog.Logger) string {
	p := c.String("kubelet-registration-path")
	if !filepath.IsAbs(p) || hasDotDot(p) {
		return p
	}
	if clean := filepath.Clean(p); clean != p {
		log.Info("--kubelet-registration-path cleaned", "given", p, "kubeletRegistrationPath", clean)
		return clean
	}
	return p
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}
