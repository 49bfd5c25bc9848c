package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

func probeCommand() *cli.Command {
	return &cli.Command{
		Name:  "probe",
		Usage: "call the CSI driver's Probe and exit 0 if it is ready, 1 if not (for an exec livenessProbe)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "csi-address", Value: registrar.DefaultCSIAddress, EnvVars: probeEnv("csi-address"),
				Usage: "the CSI driver's socket: a path or unix:// URL"},
			&cli.DurationFlag{Name: "timeout", Value: 3 * time.Second, EnvVars: probeEnv("timeout"),
				Usage: "how long to wait for the answer"},
		},
		Action: func(c *cli.Context) error {
			if err := notEmpty(c, "csi-address"); err != nil {
				return err
			}
			addr := c.String("csi-address")
			if err := registrar.ProbeDriver(c.Context, addr, c.Duration("timeout")); err != nil {
				if csiplugin.IsValidationError(err) {
					return err
				}
				return cli.Exit("not ready: "+err.Error(), exitError)
			}
			fmt.Fprintf(c.App.Writer, "ready: %s answered Probe\n", addr)
			return nil
		},
	}
}
