package registrar

import "time"

// Limits of the HTTP endpoint, for the tests that hold connections.
const (
	HTTPMaxConns = 100 // defaultHTTPLimits.maxConns
)

// SetHTTPTimeouts sets every timeout of the HTTP endpoint to d, so that a
// test holding connections knows none is released by a timeout. Call it
// before Run.
func (r *Registrar) SetHTTPTimeouts(d time.Duration) {
	r.httpLimits.readHeader, r.httpLimits.read, r.httpLimits.write, r.httpLimits.idle = d, d, d, d
}
