package registrar

// Limits of the HTTP endpoint, for the tests that hold connections.
const (
	HTTPMaxConns    = httpMaxConns
	HTTPIdleTimeout = httpIdleTimeout
)
