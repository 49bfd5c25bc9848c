package clusterstatus

import "github.com/csi-registrar/csi-registrar/registrar/csiplugin"

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

// OptionError is the value of one input breaking a rule. Its message calls
// the input by its field ("Options.ProxyTimeout"); a command names its own
// flag or argument instead with Describe.
type OptionError struct {
	Option Option
	Value  string // the value, as given
	Rule   string // the rule it breaks, including any limit
	Fix    string // what the user should do
}

func (e *OptionError) Error() string { return e.Describe(string(e.Option)) }

// Describe returns the message with the input called name, e.g.
// "--proxy-timeout". It reads as a *csiplugin.ValidationError's.
func (e *OptionError) Describe(name string) string {
	return (&csiplugin.ValidationError{What: name, Value: e.Value, Rule: e.Rule, Fix: e.Fix}).Error()
}
