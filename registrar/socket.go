package registrar

import (
	"io/fs"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/sockfile"
)

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
	if err := checkSocketPathLength("endpoint", p, "use a shorter socket path"); err != nil {
		return "", err
	}
	return p, nil
}

// fileKind names the type of file m describes, e.g. "regular file".
func fileKind(m fs.FileMode) string { return sockfile.FileKind(m) }
