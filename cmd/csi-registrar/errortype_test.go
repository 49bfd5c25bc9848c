package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// TestEveryCommandBadValue lists the commands: for a bad value, each
// returns the one error of a bad value, a *csiplugin.ValidationError (the
// value, the rule, the fix; a library's inside its *registrar.OptionError),
// exits 2, and the message names the flag. A command added without a case
// here fails.
func TestEveryCommandBadValue(t *testing.T) {
	type badValue struct {
		args []string
		flag string
	}
	bad := map[string]badValue{
		"register": {[]string{"csi-registrar", "register", "--kubelet-registration-path=relative.sock"}, "--kubelet-registration-path"},
		"driver":   {[]string{"csi-registrar", "driver", "--node-id=n", "--max-volumes-per-node=-1"}, "--max-volumes-per-node"},
		"probe":    {[]string{"csi-registrar", "probe", "--timeout=soon"}, "--timeout"},
		"doctor":   {[]string{"csi-registrar", "doctor", "--output=xml"}, "--output"},
	}
	takesNoValue := map[string]bool{"version": true}
	for _, c := range newApp(io.Discard, io.Discard, defaultRoles()).Commands {
		if takesNoValue[c.Name] {
			continue
		}
		b, ok := bad[c.Name]
		if !ok {
			t.Errorf("command %s: no bad value listed here", c.Name)
			continue
		}
		delete(bad, c.Name)
		code, err := execute(b.args, io.Discard, io.Discard, defaultRoles())
		var ve *csiplugin.ValidationError
		if !errors.As(err, &ve) || code != exitBadInput || ve.Rule == "" || ve.Fix == "" {
			t.Errorf("%q: exit %d, error %#v; want %d and a *csiplugin.ValidationError with the rule and the fix", b.args, code, err, exitBadInput)
			continue
		}
		if msg := message(err); !strings.Contains(msg, b.flag) || strings.Contains(msg, "Options.") {
			t.Errorf("%q: message %q; want it to name %s, not a library field", b.args, msg, b.flag)
		}
	}
	for name := range bad {
		t.Errorf("command %s is listed here but not a command", name)
	}
}
