package clusterstatus

import (
	"errors"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
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
		{func() error { o := valid; o.Format = "table%v"; return o.Validate() }(), OptionFormat, `invalid Options.Format "table%v": is not an output format`},
	} {
		var oe *csiplugin.ValidationError
		if !errors.As(c.err, &oe) || oe.What != string(c.want) || !strings.HasPrefix(c.err.Error(), c.msg) || strings.Contains(c.err.Error(), "--") {
			t.Errorf("error %v, want a *csiplugin.ValidationError of %s starting %q and naming no flag", c.err, c.want, c.msg)
		}
	}
	if err := valid.Validate(); err != nil {
		t.Errorf("Validate of valid options: %v", err)
	}
	named := valid
	named.ProxyConcurrency, named.Names = 0, map[Option]string{OptionProxyConcurrency: "--proxy-concurrency"}
	if err := named.Validate(); err == nil || !strings.HasPrefix(err.Error(), `invalid --proxy-concurrency "0": must be at least 1`) {
		t.Errorf("with Names: %v, want the input called by its name", err)
	}
}
