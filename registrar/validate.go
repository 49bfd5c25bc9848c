package registrar

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

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
	msg := fmt.Sprintf("invalid %s %q: %s", e.What, e.Value, e.Rule)
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
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
			Fix: "the driver must report (or --driver-name must give) a name such as \"hostpath.csi.k8s.io\""}
	}
	if name == "" {
		return bad("must not be empty")
	}
	if len(name) > MaxDriverNameLength {
		return bad(fmt.Sprintf("is %d characters long, the limit is %d", len(name), MaxDriverNameLength))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '-' && c != '.' {
			return bad(fmt.Sprintf("contains %q at position %d; only letters, digits, '-' and '.' are allowed", c, i))
		}
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || !isAlnum(label[0]) || !isAlnum(label[len(label)-1]) {
			return bad("every dot-separated part must start and end with a letter or digit (a DNS-1123 subdomain once lower-cased)")
		}
	}
	return nil
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
			Fix: "set --plugin-registration-path to the directory mounted from /var/lib/kubelet/plugins_registry"}
	}
	p := filepath.Join(dir, driverName+RegistrationSocketSuffix)
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	if err != nil || rel != filepath.Base(p) {
		return "", &ValidationError{What: "registration socket path", Value: p,
			Rule: fmt.Sprintf("must be a file directly inside %q", dir), Fix: "use a driver name without path separators"}
	}
	if err := checkSocketPathLength("registration socket path", p,
		"shorten --plugin-registration-path or the driver name"); err != nil {
		return "", err
	}
	return p, nil
}

// ValidateKubeletRegistrationPath checks the driver socket path the kubelet
// will dial: it must be absolute, clean and fit a unix socket address.
func ValidateKubeletRegistrationPath(p string) error {
	const what = "--kubelet-registration-path"
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
