package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name: "doctor",
		Usage: "diagnose plugin registration on this node: list plugins_registry, ask every socket GetInfo, check each CSI driver " +
			"(and, with --kubeconfig, the Node, CSINode and CSIDriver objects); exit 0 healthy, 1 findings, 2 bad arguments. Changes nothing.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kubelet-dir", Value: doctor.DefaultKubeletDir, EnvVars: env("kubelet-dir"),
				Usage: "the kubelet's --root-dir on the host"},
			&cli.StringFlag{Name: "plugins-registry", EnvVars: env("plugins-registry"),
				Usage: "the plugin watcher's directory on the host (default <kubelet-dir>/plugins_registry)"},
			&cli.StringFlag{Name: "host-root", EnvVars: env("host-root"),
				Usage: "where the host's / is mounted here: empty on the node, /host in `kubectl debug node/NAME`"},
			&cli.StringFlag{Name: "node-name", EnvVars: env("node-name"),
				Usage: "the node's Kubernetes name, compared with each driver's node ID (default $KUBE_NODE_NAME, else the host name lower-cased)"},
			&cli.StringFlag{Name: "node-labels", EnvVars: env("node-labels"),
				Usage: "the Node's labels as key=value,...: topology segments that collide with them are flagged"},
			&cli.StringFlag{Name: "kubeconfig", EnvVars: env("kubeconfig"),
				Usage: "compare with the API server (Node annotation, CSINode, CSIDriver) using this kubeconfig, e.g. /etc/kubernetes/kubelet.conf"},
			&cli.StringFlag{Name: "kubelet-metrics", EnvVars: env("kubelet-metrics"),
				Usage: "a file with the kubelet's /metrics text, read for its plugin state (retired registrations) instead of the API server's node proxy, which --kubeconfig uses and which needs get nodes/proxy"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", EnvVars: env("output"),
				Usage: "text or json"},
			&cli.DurationFlag{Name: "timeout", Value: doctor.DefaultTimeout, EnvVars: env("timeout"),
				Usage: "timeout of each call to a CSI driver and each API request (GetInfo always has the kubelet's 1s)"},
		},
		Action: func(c *cli.Context) error {
			if err := notEmpty(c, "kubelet-dir", "output"); err != nil {
				return err
			}
			output := c.String("output")
			if output != "text" && output != "json" {
				return badFlag("output", output, "must be text or json", "use --output=text or --output=json")
			}
			if t := c.Duration("timeout"); t <= 0 {
				return badFlag("timeout", t.String(), "must be positive", "e.g. --timeout=1s")
			}
			labels, err := doctor.ParseLabels(c.String("node-labels"))
			if err != nil {
				return err
			}
			nodeName := c.String("node-name")
			if !c.IsSet("node-name") {
				if nodeName = os.Getenv("KUBE_NODE_NAME"); nodeName == "" {
					h, _ := os.Hostname()
					nodeName = strings.ToLower(h) // the kubelet's default node name
				}
			}
			report, err := doctor.Run(c.Context, doctor.Options{
				KubeletDir:      c.String("kubelet-dir"),
				PluginsRegistry: c.String("plugins-registry"),
				HostRoot:        c.String("host-root"),
				NodeName:        nodeName,
				NodeLabels:      labels,
				Timeout:         c.Duration("timeout"),
				Kubeconfig:      c.String("kubeconfig"),
				KubeletMetrics:  c.String("kubelet-metrics"),
			})
			if err != nil {
				return err
			}
			if output == "json" {
				err = doctor.WriteJSON(c.App.Writer, report)
			} else {
				err = doctor.WriteText(c.App.Writer, report)
			}
			if err != nil {
				return err
			}
			if !report.Healthy() {
				return cli.Exit(fmt.Sprintf("plugin registration is not healthy: %d error(s), %d warning(s)",
					report.Count(doctor.SeverityError), report.Count(doctor.SeverityWarning)), exitError)
			}
			return nil
		},
	}
}
