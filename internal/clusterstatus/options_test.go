package clusterstatus

import (
	"errors"
	"strings"
	"testing"
)

// TestOptionErrorsNameFields: the library's errors name its fields, never
// a command's flags, and quote the value verbatim.
func TestOptionErrorsNameFields(t *testing.T) {
	valid := Options{ProxyTimeout: DefaultProxyTimeout, ProxyConcurrency: DefaultProxyConcurrency}
	for _, c := range []struct {
		err  error
		want Option
		msg  string
	}{
		{func() error { o := valid; o.Driver = "bad/100%s"; return o.Validate() }(), OptionDriver, `invalid Options.Driver "bad/100%s": `},
		{func() error { o := valid; o.ProxyTimeout = 0; return o.Validate() }(), OptionProxyTimeout, `invalid Options.ProxyTimeout "0s": must be positive`},
		{func() error { o := valid; o.ProxyConcurrency = 0; return o.Validate() }(), OptionProxyConcurrency, `invalid Options.ProxyConcurrency "0": must be at least 1`},
		{ValidOutput("table%v"), OptionFormat, `invalid Printer.Format "table%v": is not an output format`},
	} {
		var oe *OptionError
		if !errors.As(c.err, &oe) || oe.Option != c.want || !strings.HasPrefix(c.err.Error(), c.msg) || strings.Contains(c.err.Error(), "--") {
			t.Errorf("error %v, want an *OptionError of %s starting %q and naming no flag", c.err, c.want, c.msg)
		}
	}
	if err := valid.Validate(); err != nil {
		t.Errorf("Validate of valid options: %v", err)
	}
}
