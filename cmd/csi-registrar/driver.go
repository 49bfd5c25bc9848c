package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// registrationCategory groups the flags of in-process registration in --help.
const registrationCategory = "In-process registration (with --register)"

// registrationFlags are the register flags that make sense inside the driver:
// the driver's own socket and name replace --csi-address and --driver-name.
func registrationFlags() []cli.Flag {
	register := &cli.BoolFlag{Name: "register", EnvVars: env("register"), Category: registrationCategory,
		Usage: "register the driver with the kubelet from this process, without the registrar sidecar"}
	return append([]cli.Flag{register}, kubeletFlags(registrationCategory, "required with --register")...)
}

// kubeletFlags are the flags of the registration with the kubelet, the same
// for the register command and for the driver's in-process registration:
// category groups them in --help ("" for none), required says when
// --kubelet-registration-path is required.
func kubeletFlags(category, required string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubelet-registration-path", EnvVars: env("kubelet-registration-path"), Category: category,
			Usage: "the CSI driver's socket path on the host, as the kubelet dials it (" + required + ")"},
		&cli.StringFlag{Name: "plugin-registration-path", Value: registrar.DefaultPluginRegistrationPath,
			EnvVars: env("plugin-registration-path"), Category: category,
			Usage: "the directory where the kubelet's plugins_registry is mounted"},
		&cli.DurationFlag{Name: "kubelet-wait", Value: registrar.DefaultKubeletWait, EnvVars: env("kubelet-wait"), Category: category,
			Usage: "re-create the registration socket when the kubelet has not called GetInfo on it, or not sent NotifyRegistrationStatus after GetInfo, for this long"},
		&cli.DurationFlag{Name: "registration-retry-max", Value: registrar.DefaultRegistrationRetryMax,
			EnvVars: env("registration-retry-max"), Category: category,
			Usage: "cap of the backoff (1s doubling) between socket re-creations after a kubelet rejection, silence or conflict"},
		&cli.StringFlag{Name: "http-endpoint", EnvVars: env("http-endpoint"), Category: category,
			Usage: "TCP address (e.g. :9809) serving /healthz, /readyz and /metrics; empty disables the server"},
		&cli.BoolFlag{Name: "enable-pprof", EnvVars: env("enable-pprof"), Category: category,
			Usage: "serve /debug/pprof/ on --http-endpoint"},
		&cli.StringFlag{Name: "rolling-update", EnvVars: env("rolling-update"), Category: category,
			Usage: "this pod's UID (env from the downward API's metadata.uid): turns on the handover, in which a DaemonSet rolling with maxSurge passes the registration socket from pod to pod and the kubelet sees no rollout (docs/design.md, \"The handover\"); --csi-address and --kubelet-registration-path must then name this pod's own CSI socket, with the same base name"},
	}
}

func driverCommand(run func(context.Context, stubdriver.Options) error) *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "endpoint", Value: "unix:///csi/csi.sock", EnvVars: env("endpoint"),
			Usage: "the socket to serve CSI on: a unix:// URL or a path"},
		&cli.StringFlag{Name: "driver-name", Value: stubdriver.DefaultName, EnvVars: env("driver-name"),
			Usage: "the name GetPluginInfo reports"},
		&cli.StringFlag{Name: "node-id", EnvVars: env("node-id"),
			Usage: "the node ID NodeGetInfo reports (default $KUBE_NODE_NAME, else the host name)"},
		&cli.Int64Flag{Name: "max-volumes-per-node", EnvVars: env("max-volumes-per-node"),
			Usage: "the volume limit NodeGetInfo reports; 0 = not set"},
		&cli.StringSliceFlag{Name: "topology", EnvVars: env("topology"),
			Usage: "a topology segment key=value NodeGetInfo reports (repeatable)"},
		&cli.StringFlag{Name: "state-dir", EnvVars: env("state-dir"),
			Usage: "directory for the ephemeral volumes' data (a hostPath); empty: no volumes are published"},
		&cli.StringFlag{Name: "kubelet-pods-dir", Value: stubdriver.DefaultKubeletPodsDir, EnvVars: env("kubelet-pods-dir"),
			Usage: "the kubelet's pods directory, as mounted in this container: volumes are published only below it"},
		&cli.DurationFlag{Name: "shutdown-delay", EnvVars: env("shutdown-delay"),
			Usage: "keep serving the CSI socket this long after SIGTERM (with the handover, --rolling-update: the kubelet may still call this endpoint while the next pod takes over); 0 stops at once"},
		&cli.BoolFlag{Name: "version", Usage: "print the version and exit"},
	}
	flags = append(flags, registrationFlags()...)
	flags = append(flags, loggingFlags()...)
	return &cli.Command{
		Name:  "driver",
		Usage: "run the reference CSI node driver (Identity and Node services, ephemeral volumes)",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				fmt.Fprintln(c.App.Writer, "csi-registrar", version)
				return nil
			}
			log, lc, err := commandLogger(c, "endpoint", "driver-name", "plugin-registration-path", "kubelet-pods-dir")
			if err != nil {
				return err
			}
			topo, err := stubdriver.ParseTopology(c.StringSlice("topology"))
			if err != nil {
				return err
			}
			reg, err := driverRegistration(c, log)
			if err != nil {
				return err
			}
			nodeID := c.String("node-id")
			if !c.IsSet("node-id") {
				if nodeID = os.Getenv("KUBE_NODE_NAME"); nodeID == "" {
					nodeID, _ = os.Hostname()
					log.Warn("--node-id and KUBE_NODE_NAME are not set: using the host name; inside a pod that is the pod's name, not the node's",
						"nodeID", nodeID, "fix", "pass --node-id=$(KUBE_NODE_NAME) with KUBE_NODE_NAME from spec.nodeName")
				}
			}
			logIgnored(c, log, nil)
			routeKlog(log, lc.v)
			ctx, stop := signalContext(c.Context, log)
			defer stop()
			return run(ctx, stubdriver.Options{
				Endpoint:          c.String("endpoint"),
				Name:              c.String("driver-name"),
				VendorVersion:     version,
				NodeID:            nodeID,
				MaxVolumesPerNode: c.Int64("max-volumes-per-node"),
				Topology:          topo,
				StateDir:          c.String("state-dir"),
				KubeletPodsDir:    c.String("kubelet-pods-dir"),
				Register:          reg,
				ShutdownDelay:     c.Duration("shutdown-delay"),
				Logger:            log,
			})
		},
	}
}

// driverRegistration maps the in-process registration flags to
// registrar.Options: nil without --register, and an error when one of them
// is given without it (it would have no effect).
func driverRegistration(c *cli.Context, log *slog.Logger) (*registrar.Options, error) {
	if !c.Bool("register") {
		for _, f := range registrationFlags() {
			if name := f.Names()[0]; name != "register" && c.IsSet(name) {
				return nil, badFlag(name, fmt.Sprint(c.Value(name)), "has no effect without --register",
					"add --register to register from the driver's process, or drop --"+name)
			}
		}
		return nil, nil
	}
	// The rules of each value (--kubelet-registration-path is required,
	// absolute, clean) are the library's: registrar.New checks them once.
	return &registrar.Options{
		KubeletRegistrationPath: kubeletRegistrationPath(c, log),
		PluginRegistrationPath:  c.String("plugin-registration-path"),
		KubeletWait:             c.Duration("kubelet-wait"),
		RegistrationRetryMax:    c.Duration("registration-retry-max"),
		RollingUpdate:           c.String("rolling-update"),
		HTTPEndpoint:            c.String("http-endpoint"),
		EnablePprof:             c.Bool("enable-pprof"),
		Version:                 version,
	}, nil
}

// routeKlog sends k8s.io/klog/v2 output (from k8s.io/mount-utils) to log, so
// the driver writes one format, and sets klog's verbosity to --v: klog drops
// a V(n) line itself before it reaches the logger, and V(n) becomes slog
// level -n, the same mapping newLogger uses. klog's settings are process-wide:
// this is done here, by the process's owner, never in a library.
func routeKlog(log *slog.Logger, v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(v)) // v ≥ 0: newLogger checked it
	klog.SetSlogLogger(log.With("logger", "klog"))
}
