package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// badFlag is the error for a flag value that breaks a rule.
func badFlag(name, value, rule, fix string) error {
	return &registrar.ValidationError{What: "--" + name, Value: value, Rule: rule, Fix: fix}
}

// notEmpty refuses a flag that has a default but was given an empty value
// (e.g. --csi-address= or an empty CSI_REGISTRAR_CSI_ADDRESS): the library
// would quietly use its default instead of what the user meant.
func notEmpty(c *cli.Context, names ...string) error {
	for _, name := range names {
		if c.IsSet(name) && c.String(name) == "" {
			return badFlag(name, "", "must not be empty", "omit it to use the default")
		}
	}
	return nil
}

// flagNames rewrites the libraries' names of options (registrar.Options and
// stubdriver.Options fields, as their errors name them) into the flags that set them, so that an
// error tells the user what to change on the command line.
var flagNames = strings.NewReplacer(
	"Options.CSIAddress", "--csi-address",
	"Options.KubeletRegistrationPath", "--kubelet-registration-path",
	"Options.PluginRegistrationPath", "--plugin-registration-path",
	"Options.DriverName", "--driver-name",
	"Options.Timeout", "--timeout",
	"Options.ConnectionTimeout", "--connection-timeout",
	"Options.KubeletWait", "--kubelet-wait",
	"Options.RegistrationRetryMax", "--registration-retry-max",
	"Options.HTTPEndpoint", "--http-endpoint",
	"Options.EnablePprof", "--enable-pprof",
	// stubdriver.Options
	"Options.Endpoint", "--endpoint",
	"Options.MaxVolumesPerNode", "--max-volumes-per-node",
	"Options.StateDir", "--state-dir",
	"Options.KubeletPodsDir", "--kubelet-pods-dir",
)
