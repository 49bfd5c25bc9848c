package csiplugin_test

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

func TestValidateDriverName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wantRule string // "" = valid
	}{
		{"stub.csi.example.com", ""},
		{"hostpath.csi.k8s.io", ""},
		{"A", ""},
		{"Disk.CSI.Example.COM", ""}, // CSI allows upper case; CSINode lower-cases before checking
		{strings.Repeat("a", 63), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", 64), "64 characters long, the limit is 63"},
		{strings.Repeat("a", 200), "200 characters long, the limit is 63"},
		{"../../evil", `'/'`},
		{"a/b", `'/'`},
		{"a_b", `'_'`},
		{"a\nb", `'\n'`},
		{"-a", "every dot-separated part"},
		{"a-", "every dot-separated part"},
		{"a..b", "every dot-separated part"},
		{"a.-b", "every dot-separated part"},
		{".a", "every dot-separated part"},
		{"a b", `' '`},
	} {
		err := csiplugin.ValidateDriverName(tc.name)
		if tc.wantRule == "" {
			if err != nil {
				t.Errorf("ValidateDriverName(%q) = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil || !csiplugin.IsValidationError(err) {
			t.Errorf("ValidateDriverName(%q) = %v, want a validation error", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantRule) || !strings.Contains(err.Error(), strings.ReplaceAll(tc.name, "\n", `\n`)) {
			t.Errorf("ValidateDriverName(%q) = %q, want it to name the value and %q", tc.name, err, tc.wantRule)
		}
	}
}

func TestRegistrationSocketPath(t *testing.T) {
	p, err := csiplugin.RegistrationSocketPath("/registration", "a.example.com")
	if err != nil || p != "/registration/a.example.com-reg.sock" {
		t.Fatalf("got %q, %v", p, err)
	}
	long := "/" + strings.Repeat("d", 60)
	if _, err := csiplugin.RegistrationSocketPath(long, strings.Repeat("n", 50)); err == nil ||
		!strings.Contains(err.Error(), "at most 107") {
		t.Fatalf("over-long socket path: %v, want the 107-byte rule", err)
	}
}

func TestValidateKubeletRegistrationPath(t *testing.T) {
	for _, tc := range []struct{ path, rule string }{
		{"/var/lib/kubelet/plugins/x/csi.sock", ""},
		{"", "is required"},
		{"var/lib/kubelet/plugins/x/csi.sock", "absolute"},
		{"/var/lib/kubelet/../x/csi.sock", "clean"},
		{"/var/lib/kubelet/plugins/x/", "clean"},
		{"/" + strings.Repeat("p", 107), "at most 107"},
	} {
		err := csiplugin.ValidateHostSocketPath("kubelet registration path", tc.path)
		if (err == nil) != (tc.rule == "") || err != nil && !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("ValidateKubeletRegistrationPath(%q) = %v, want rule %q", tc.path, err, tc.rule)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///csi/csi.sock": "/csi/csi.sock",
		"unix:/csi/csi.sock":   "/csi/csi.sock",
		"/csi/csi.sock":        "/csi/csi.sock",
		"tcp://127.0.0.1:10":   "",
		"csi.sock":             "",
		"unix://":              "",
	} {
		got, err := csiplugin.ParseEndpoint(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// FuzzValidateDriverName checks the properties the rest of the program
// relies on for every name it accepts.
func FuzzValidateDriverName(f *testing.F) {
	for _, s := range []string{"stub.csi.example.com", "../../evil", "a_b", "a\nb", "", "A", "a..b", strings.Repeat("x", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if csiplugin.ValidateDriverName(name) != nil {
			return
		}
		if name == "" || len(name) > 63 || !utf8.ValidString(name) || strings.ContainsAny(name, "/\\\x00\n_ ") {
			t.Fatalf("accepted %q", name)
		}
		if !isDNS1123Subdomain(strings.ToLower(name)) {
			t.Fatalf("accepted %q, which is no DNS-1123 subdomain once lower-cased", name)
		}
	})
}

// FuzzRegistrationSocketPath: every accepted path is a direct child of the
// directory and fits a unix socket address.
func FuzzRegistrationSocketPath(f *testing.F) {
	f.Add("/registration", "stub.csi.example.com")
	f.Add("/registration/", "../../evil")
	f.Add("/a/../b", "x")
	f.Add("reg", "x.y")
	f.Fuzz(func(t *testing.T, dir, name string) {
		p, err := csiplugin.RegistrationSocketPath(dir, name)
		if err != nil {
			return
		}
		if filepath.Dir(p) != filepath.Clean(dir) || filepath.Base(p) != name+"-reg.sock" || len(p) > 107 {
			t.Fatalf("RegistrationSocketPath(%q, %q) = %q escapes or does not fit", dir, name, p)
		}
	})
}

// isDNS1123Subdomain is written independently of the code under test, from
// the Kubernetes definition.
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for i, c := range l {
			alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
			if !alnum && (c != '-' || i == 0 || i == len(l)-1) {
				return false
			}
		}
	}
	return true
}

// Issue 18 item 5: an invalid value is echoed at most MaxEchoedValue bytes
// long, with its length.
func TestValidationErrorCapsValue(t *testing.T) {
	long := strings.Repeat("a", 1<<20) + "_"
	err := csiplugin.ValidateDriverName(long)
	if err == nil {
		t.Fatal("a 1 MiB name was accepted")
	}
	msg := err.Error()
	if len(msg) > 2*csiplugin.MaxEchoedValue || !strings.Contains(msg, "(1048577 bytes)") {
		t.Fatalf("error is %d bytes long, want the value cut to %d bytes and its length named: %.300q",
			len(msg), csiplugin.MaxEchoedValue, msg)
	}
	// A cut never splits a character.
	multi := strings.Repeat("ï", 300)
	if got := csiplugin.Echo(multi); !utf8.ValidString(got) || !strings.Contains(got, "(600 bytes)") {
		t.Errorf("Echo of 300 × 'ï' = %q, want valid UTF-8 naming 600 bytes", got)
	}
}

// Issue 18 item 5: a multi-byte character is reported whole, at its
// position in characters; a byte that is not UTF-8 is named as a byte.
func TestValidateDriverNameReportsRunes(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"naïve.example.com", `'ï' at position 2`},
		{"a€b", `'€' at position 1`},
		{"ab\xc3", `the byte 0xc3 (not UTF-8) at position 2`},
		{"a_b", `'_' at position 1`},
	} {
		err := csiplugin.ValidateDriverName(c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateDriverName(%q) = %v, want it to name %s", c.name, err, c.want)
		}
	}
}

func TestIsDNSSubdomain(t *testing.T) {
	for s, want := range map[string]bool{
		"example.com":           true,
		"a":                     true,
		"node-1.zone-a":         true,
		"":                      false,
		"Example.com":           false,
		"-a.com":                false,
		"a-.com":                false,
		"a..com":                false,
		"a_b.com":               false,
		strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false,
	} {
		if got := csiplugin.IsDNSSubdomain(s); got != want {
			t.Errorf("IsDNSSubdomain(%q) = %v, want %v", s, got, want)
		}
	}
}
