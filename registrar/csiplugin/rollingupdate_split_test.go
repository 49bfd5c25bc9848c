package csiplugin_test

import (
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// TestSplitRollingUpdateSocketName: the shape of an announcement socket is
// told without knowing its driver, and agrees with
// ParseRollingUpdateSocketName; no socket of a registrar without the mode
// has it.
func TestSplitRollingUpdateSocketName(t *testing.T) {
	long := strings.Repeat("d", 50) + ".example.com"
	for _, driver := range []string{"stub.csi.example.com", long} {
		inst := csiplugin.InstanceID("pod-uid-1")
		name := csiplugin.RollingUpdateSocketName(driver, inst, 1764088602123)
		prefix, gotInst, v, ok := csiplugin.SplitRollingUpdateSocketName(name)
		if !ok || prefix != csiplugin.RollingUpdatePrefix(driver) || gotInst != inst || v != 1764088602123 {
			t.Errorf("%s: %q %q %d %v", name, prefix, gotInst, v, ok)
		}
		if i, v2, ok := csiplugin.ParseRollingUpdateSocketName(driver, name); !ok || i != gotInst || v2 != v {
			t.Errorf("%s: Parse disagrees: %q %d %v", name, i, v2, ok)
		}
	}
	for _, name := range []string{
		"stub.csi.example.com-reg.sock",               // without the mode
		"stub_12345678_1.sock",                        // not a registration socket
		"_12345678_1-reg.sock",                        // no prefix
		"stub_1234567_1-reg.sock",                     // instance too short
		"stub_1234567g_1-reg.sock",                    // not hex
		"stub_12345678_01-reg.sock",                   // version not canonical
		"stub_12345678_-reg.sock",                     // no version
		"a_b_12345678_1-reg.sock",                     // '_' in the prefix
		".stub_12345678.birth",                        // a birth file
		"stub_12345678_99999999999999999999-reg.sock", // over uint64
	} {
		if p, i, v, ok := csiplugin.SplitRollingUpdateSocketName(name); ok {
			t.Errorf("%s: took it for an announcement: %q %q %d", name, p, i, v)
		}
	}
}
