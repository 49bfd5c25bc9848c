package main

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/nodestatus"
)

// nodeStatusCategory groups the flags of the Node condition and the startup taint.
const nodeStatusCategory = "Node readiness (off by default; they need a service account token and RBAC: docs/operating.md, \"Node readiness\")"

// nodeStatusFlags are register's flags of registrar/nodestatus.
func nodeStatusFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "node-condition", EnvVars: env("node-condition"), Category: nodeStatusCategory,
			Usage: "own this Node condition type, e.g. <driver>/NodePluginRegistered: True once the kubelet confirmed the registration and the driver answers"},
		&cli.StringFlag{Name: "remove-startup-taint", EnvVars: env("remove-startup-taint"), Category: nodeStatusCategory,
			Usage: "remove the taint with this key from the Node once the registration is confirmed and the CSINode lists the driver; never added back"},
		&cli.StringFlag{Name: "node-name", EnvVars: env("node-name"), Category: nodeStatusCategory,
			Usage: "this pod's Node (default $KUBE_NODE_NAME: downward API spec.nodeName); read only with --node-condition or --remove-startup-taint"},
	}
}

// nodeStatusOptions turns the flags into nodestatus.Options and checks them.
func nodeStatusOptions(c *cli.Context) (nodestatus.Options, error) {
	o := nodestatus.Options{Condition: c.String("node-condition"), StartupTaint: c.String("remove-startup-taint")}
	if !o.Enabled() {
		return nodestatus.Options{}, nil
	}
	o.NodeName = c.String("node-name")
	if !c.IsSet("node-name") {
		o.NodeName = os.Getenv("KUBE_NODE_NAME")
	}
	return o, o.Validate()
}

// runRegistrar runs the registrar and, when ns asks for it, the Node
// status reporter beside it with the same context. Without ns nothing
// reads the in-cluster configuration or talks to the API server.
func runRegistrar(ctx context.Context, o registrar.Options, ns nodestatus.Options) error {
	if !ns.Enabled() {
		r, err := registrar.New(o)
		if err != nil {
			return err
		}
		return r.Run(ctx)
	}
	ns.Logger = o.Logger
	ns.Handover = o.RollingUpdate != ""
	rep, err := nodestatus.New(ns)
	if err != nil {
		return err
	}
	o.ReadyCheck = rep.ReadyCheck
	r, err := registrar.New(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	var repErr error
	go func() {
		defer wg.Done()
		repErr = rep.Run(ctx, r)
	}()
	err = r.Run(ctx)
	cancel()
	wg.Wait()
	return errors.Join(err, repErr)
}
