package main

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

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
		&cli.BoolFlag{Name: "version", Usage: "print the version and exit"},
	}
	flags = append(flags, loggingFlags()...)
	return &cli.Command{
		Name:  "driver",
		Usage: "run the reference CSI node driver (Identity and Node services)",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				fmt.Fprintln(c.App.Writer, "csi-registrar", version)
				return nil
			}
			if err := notEmpty(c, "endpoint", "driver-name"); err != nil {
				return err
			}
			log, err := newLogger(c, c.App.ErrWriter)
			if err != nil {
				return err
			}
			topo, err := stubdriver.ParseTopology(c.StringSlice("topology"))
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
			logIgnored(c, log, map[string]string{"vmodule": "verbosity is global", "log-flush-frequency": "logs are written unbuffered"})
			ctx, stop := signalContext(c.Context, log)
			defer stop()
			return run(ctx, stubdriver.Options{
				Endpoint:          c.String("endpoint"),
				Name:              c.String("driver-name"),
				VendorVersion:     version,
				NodeID:            nodeID,
				MaxVolumesPerNode: c.Int64("max-volumes-per-node"),
				Topology:          topo,
				Logger:            log,
			})
		},
	}
}
