package registrartest

import (
	"net"
	"testing"
)

// StaleSocket leaves a socket file at path that nobody listens on, as a
// process that was killed leaves it: bound and listening, then closed
// without unlinking. Connecting to it is refused.
func StaleSocket(tb testing.TB, path string) {
	tb.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		tb.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}
