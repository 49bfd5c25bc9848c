package clusterstatus

// Option names an input of the package, a field of Options.
type Option string

// The inputs an error about a value can name.
const (
	OptionDriver           Option = "Options.Driver"
	OptionProxyTimeout     Option = "Options.ProxyTimeout"
	OptionProxyConcurrency Option = "Options.ProxyConcurrency"
	OptionFormat           Option = "Options.Format"
)

// name is what the messages call input opt: Options.Names' name for it (a
// command's flag or argument), else its field.
func (o *Options) name(opt Option) string {
	if n, ok := o.Names[opt]; ok {
		return n
	}
	return string(opt)
}
