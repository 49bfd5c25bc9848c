package clusterstatus

import "github.com/csi-registrar/csi-registrar/internal/optionerror"

// Option names an input of the package, a field of Options or of Printer,
// as an *OptionError reports it.
type Option string

// The inputs an *OptionError can name.
const (
	OptionDriver           Option = "Options.Driver"
	OptionProxyTimeout     Option = "Options.ProxyTimeout"
	OptionProxyConcurrency Option = "Options.ProxyConcurrency"
	OptionFormat           Option = "Printer.Format"
)

// OptionError is the value of one input breaking a rule
// (optionerror.Error): its message calls the input by its field; a command
// names its own flag instead with optionerror.Named.
type OptionError = optionerror.Error[Option]
