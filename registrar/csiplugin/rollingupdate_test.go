package csiplugin

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestRollingUpdateSocketNameRoundTrip(t *testing.T) {
	long := strings.Repeat("a", 30) + "." + strings.Repeat("b", 32) // 63 characters
	for _, driver := range []string{"stub.csi.example.com", long, "x"} {
		inst := InstanceID("5300db25-00ed-461a-b1c4-d0425ef14929")
		name := RollingUpdateSocketName(driver, inst, 1795623241703)
		gotInst, v, ok := ParseRollingUpdateSocketName(driver, name)
		if !ok || gotInst != inst || v != 1795623241703 {
			t.Errorf("%s: Parse(%q) = %q, %d, %v", driver, name, gotInst, v, ok)
		}
		// The kubelet's directory and the largest version stay within a
		// unix socket address.
		p := filepath.Join("/var/lib/kubelet/plugins_registry", RollingUpdateSocketName(driver, inst, 9_999_999_999_999))
		if len(p) > MaxSocketPathLength {
			t.Errorf("%s: %s is %d bytes, over %d", driver, p, len(p), MaxSocketPathLength)
		}
	}
}

func TestRollingUpdateSocketNameMatchesNothingElse(t *testing.T) {
	const driver = "stub.csi.example.com"
	for _, name := range []string{
		"stub.csi.example.com-reg.sock",              // csi-registrar without the mode, node-driver-registrar
		"stub.csi.example.com_8647641d-reg.sock",     // no version
		"stub.csi.example.com_8647641D_1-reg.sock",   // not a lower-case instance
		"stub.csi.example.com_8647641d_01-reg.sock",  // not the canonical version
		"stub.csi.example.com_8647641d_1.sock",       // not a registration socket
		"other.csi.example.com_8647641d_1-reg.sock",  // another driver
		"stub.csi.example.com.x_8647641d_1-reg.sock", // another driver whose name starts alike
		".stub.csi.example.com_8647641d_1-reg.sock.lock",
	} {
		if _, _, ok := ParseRollingUpdateSocketName(driver, name); ok {
			t.Errorf("%q taken for an announcement socket of %s", name, driver)
		}
	}
}

func TestRollingUpdatePrefixOfLongNamesDiffers(t *testing.T) {
	a := strings.Repeat("a", 50) + ".one"
	b := strings.Repeat("a", 50) + ".two"
	if RollingUpdatePrefix(a) == RollingUpdatePrefix(b) {
		t.Errorf("two long names share the prefix %q", RollingUpdatePrefix(a))
	}
	if n := len(RollingUpdatePrefix(a)); n != RollingUpdatePrefixMax {
		t.Errorf("prefix of a long name is %d characters, want %d", n, RollingUpdatePrefixMax)
	}
}

func TestValidatePodUID(t *testing.T) {
	if err := ValidatePodUID("5300db25-00ed-461a-b1c4-d0425ef14929"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "$(POD_UID)", "a/b", strings.Repeat("a", 129)} {
		err := ValidatePodUID(bad)
		if err == nil || !strings.Contains(err.Error(), "pod UID") || !strings.Contains(err.Error(), "downward API") {
			t.Errorf("ValidatePodUID(%q) = %v, want an error naming the pod UID and the fix", bad, err)
		}
	}
}
