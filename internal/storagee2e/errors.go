package storagee2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/optionerror"
)

// Option names an input of the package, a field of Options, as an
// *OptionError reports it.
type Option string

// The inputs an *OptionError can name.
const (
	OptionDefinition        Option = "Options.Definition"
	OptionE2EBinary         Option = "Options.E2EBinary"
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

// OptionError is the value of one input breaking a rule
// (optionerror.Error): its message calls the input by its field; a command
// names its own flag instead with optionerror.Named.
type OptionError = optionerror.Error[Option]

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
