package registrar

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxEchoedValue is how many bytes of an invalid value a *ValidationError
// repeats: a driver may report a name of any length, and the error ends up
// in a log line. It is more than the longest value any rule here accepts
// (a label key of 317 bytes, a socket path of 107), so a value just over a
// limit is shown whole.
const MaxEchoedValue = 512

// MaxDriverNameLength is the longest driver name the CSI specification and the
// API server's CSINode validation accept.
const MaxDriverNameLength = 63

// MaxSocketPathLength is the longest path a Linux unix socket address can hold:
// sun_path is 108 bytes including the terminating NUL.
const MaxSocketPathLength = 107

// RegistrationSocketSuffix is appended to the driver name to form the
// registration socket's file name, as the kubelet's plugin watcher expects.
const RegistrationSocketSuffix = "-reg.sock"

// ValidationError reports input that breaks a rule. It names the value, the
// rule and how to fix it. Nothing is created or removed when it is returned.
type ValidationError struct {
	What  string // what was checked, e.g. "driver name"
	Value string // the offending value, as given
	Rule  string // the rule it breaks, including any limit
	Fix   string // what the user should do
}

func (e *ValidationError) Error() string {
	msg := fmt.Sprintf("invalid %s %s: %s", e.What, Echo(e.Value), e.Rule)
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// Echo quotes v for an error or a log line, cut to its first
// MaxEchoedValue bytes (at a character boundary) with the full length after
// it: "\"aaa…\"… (1048576 bytes)".
func Echo(v string) string {
	if len(v) <= MaxEchoedValue {
		return strconv.Quote(v)
	}
	cut := MaxEchoedValue
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}

// IsValidationError reports whether err is, or wraps, a *ValidationError.
func IsValidationError(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// ValidateDriverName checks name against the CSI specification (at most 63
// characters, alphanumeric at both ends, dashes, dots and alphanumerics
// between) and against the API server's CSINode rule (a DNS-1123 subdomain
// once lower-cased). It is exactly as strict as those two rules together.
func ValidateDriverName(name string) error {
	bad := func(rule string) error {
		return &ValidationError{What: "driver name", Value: name, Rule: rule,
			Fix: "the driver must report (or Options.DriverName must give) a name such as \"hostpath.csi.k8s.io\""}
	}
	if name == "" {
		return bad("must not be empty")
	}
	pos := 0 // in characters: a multi-byte character is reported whole
	for i, r := range name {
		if r >= utf8.RuneSelf || !isAlnum(byte(r)) && r != '-' && r != '.' {
			return bad(fmt.Sprintf("contains %s at position %d; only letters, digits, '-' and '.' are allowed", describeRune(name, i, r), pos))
		}
		pos++
	}
	// All ASCII from here: bytes are characters.
	if len(name) > MaxDriverNameLength {
		return bad(fmt.Sprintf("is %d characters long, the limit is %d", len(name), MaxDriverNameLength))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || !isAlnum(label[0]) || !isAlnum(label[len(label)-1]) {
			return bad("every dot-separated part must start and end with a letter or digit (a DNS-1123 subdomain once lower-cased)")
		}
	}
	return nil
}

// describeRune quotes the character r found at byte offset i of s; a byte
// that is not UTF-8 is shown as such.
func describeRune(s string, i int, r rune) string {
	if r == utf8.RuneError {
		if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
			return fmt.Sprintf("the byte 0x%02x (not UTF-8)", s[i])
		}
	}
	return strconv.QuoteRune(r)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// RegistrationSocketPath returns <dir>/<driverName>-reg.sock after checking
// that driverName is valid, that the result stays inside dir and that it fits
// a unix socket address.
func RegistrationSocketPath(dir, driverName string) (string, error) {
	if err := ValidateDriverName(driverName); err != nil {
		return "", err
	}
	if dir == "" {
		return "", &ValidationError{What: "plugin registration path", Value: dir, Rule: "must not be empty",
			Fix: "set Options.PluginRegistrationPath to the directory mounted from /var/lib/kubelet/plugins_registry"}
	}
	p := filepath.Join(dir, driverName+RegistrationSocketSuffix)
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	if err != nil || rel != filepath.Base(p) {
		return "", &ValidationError{What: "registration socket path", Value: p,
			Rule: fmt.Sprintf("must be a file directly inside %q", dir), Fix: "use a driver name without path separators"}
	}
	if err := checkSocketPathLength("registration socket path", p,
		"shorten Options.PluginRegistrationPath or the driver name"); err != nil {
		return "", err
	}
	return p, nil
}

// ValidateKubeletRegistrationPath checks the driver socket path the kubelet
// will dial: it must be absolute, clean and fit a unix socket address.
func ValidateKubeletRegistrationPath(p string) error {
	const what = "Options.KubeletRegistrationPath"
	const fix = "set it to the driver socket's path on the host, e.g. /var/lib/kubelet/plugins/<driver>/csi.sock"
	switch {
	case p == "":
		return &ValidationError{What: what, Value: p, Rule: "is required", Fix: fix}
	case !filepath.IsAbs(p):
		return &ValidationError{What: what, Value: p, Rule: "must be an absolute path", Fix: fix}
	case filepath.Clean(p) != p:
		return &ValidationError{What: what, Value: p, Rule: "must be a clean path (no '..', '.', '//' or trailing '/')",
			Fix: fmt.Sprintf("use %q", filepath.Clean(p))}
	}
	return checkSocketPathLength(what, p, fix)
}

func checkSocketPathLength(what, p, fix string) error {
	if len(p) > MaxSocketPathLength {
		return &ValidationError{What: what, Value: p,
			Rule: fmt.Sprintf("is %d bytes long, a unix socket path holds at most %d", len(p), MaxSocketPathLength),
			Fix:  fix}
	}
	return nil
}
