package csiplugin

import (
	"fmt"
	"path/filepath"
	"strings"
)

// MaxSocketPathLength is the longest path a Linux unix socket address can hold:
// sun_path is 108 bytes including the terminating NUL.
const MaxSocketPathLength = 107

// RegistrationSocketPath returns <dir>/<driverName>-reg.sock after checking
// that driverName is valid, that the result stays inside dir and that it fits
// a unix socket address.
func RegistrationSocketPath(dir, driverName string) (string, error) {
	if err := ValidateDriverName(driverName); err != nil {
		return "", err
	}
	if dir == "" {
		return "", &ValidationError{What: "plugin registration path", Value: dir, Rule: "must not be empty",
			Fix: "use the directory mounted from /var/lib/kubelet/plugins_registry"}
	}
	p := filepath.Join(dir, driverName+RegistrationSocketSuffix)
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	if err != nil || rel != filepath.Base(p) {
		return "", &ValidationError{What: "registration socket path", Value: p,
			Rule: fmt.Sprintf("must be a file directly inside %q", dir), Fix: "use a driver name without path separators"}
	}
	if err := CheckSocketPathLength("registration socket path", p,
		"shorten the plugin registration path or the driver name"); err != nil {
		return "", err
	}
	return p, nil
}

// ValidateHostSocketPath checks a driver socket path the kubelet will dial
// (GetInfo's Endpoint): it must be absolute, clean and fit a unix socket
// address. what names the value in the error.
func ValidateHostSocketPath(what, p string) error {
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
	return CheckSocketPathLength(what, p, fix)
}

// CheckSocketPathLength returns a *ValidationError naming what if p does
// not fit a unix socket address.
func CheckSocketPathLength(what, p, fix string) error {
	if len(p) > MaxSocketPathLength {
		return &ValidationError{What: what, Value: p,
			Rule: fmt.Sprintf("is %d bytes long, a unix socket path holds at most %d", len(p), MaxSocketPathLength),
			Fix:  fix}
	}
	return nil
}

// ParseEndpoint turns a CSI endpoint ("unix:///csi/csi.sock", "unix:/csi/csi.sock"
// or a plain path) into a file system path. Other schemes are refused.
func ParseEndpoint(endpoint string) (string, error) {
	p := endpoint
	if i := strings.Index(endpoint, "://"); i >= 0 {
		if endpoint[:i] != "unix" {
			return "", &ValidationError{What: "endpoint", Value: endpoint,
				Rule: "only unix sockets are supported", Fix: "use unix:///path/to/csi.sock or a plain path"}
		}
		p = endpoint[i+len("://"):]
	} else if rest, ok := strings.CutPrefix(endpoint, "unix:"); ok {
		p = rest
	}
	if p == "" || !strings.HasPrefix(p, "/") {
		return "", &ValidationError{What: "endpoint", Value: endpoint,
			Rule: "must name an absolute socket path", Fix: "use unix:///path/to/csi.sock or /path/to/csi.sock"}
	}
	if err := CheckSocketPathLength("endpoint", p, "use a shorter socket path"); err != nil {
		return "", err
	}
	return p, nil
}
