package storagee2e

import (
	"fmt"
	"strings"
	"time"
)

// Option names an input of the package, a field of Options.
type Option string

// The inputs an error about a value can name.
const (
	OptionDefinition        Option = "Options.Definition"
	OptionE2EBinary         Option = "Options.E2EBinary"
	OptionBuildOnly         Option = "Options.BuildOnly"
	OptionKubernetesVersion Option = "Options.KubernetesVersion"
	OptionCacheDir          Option = "Options.CacheDir"
	OptionFocus             Option = "Options.Focus"
	OptionSkip              Option = "Options.Skip"
	OptionRepoList          Option = "Options.RepoList"
	OptionExpected          Option = "Options.Expected"
	OptionOutDir            Option = "Options.OutDir"
	OptionTimeout           Option = "Options.Timeout"
	OptionRegisterTimeout   Option = "Options.RegisterTimeout"
)

// name is what the messages call input opt: Options.Names' name for it (a
// command's flag), else its field.
func (o *Options) name(opt Option) string {
	if n, ok := o.Names[opt]; ok {
		return n
	}
	return string(opt)
}

// NotRegisteredError is a driver that the kubelet of no node has
// registered: the suite would fail every spec. Run never installs the
// driver; its author deploys it first.
type NotRegisteredError struct {
	Driver     string
	Definition string // the definition file that names it
	Waited     time.Duration
	Nodes      []string // the nodes looked at
}

func (e *NotRegisteredError) Error() string {
	return fmt.Sprintf("driver %s (DriverInfo.Name of %s) is not registered by the kubelet of any node (%s) after %s: "+
		"deploy the driver first (e.g. its make deploy) and wait until its node plugin pods are Ready; storage-e2e never installs it",
		e.Driver, e.Definition, strings.Join(e.Nodes, ", "), e.Waited)
}

// errText is err's message, or "<nil>" as fmt prints a nil error.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
