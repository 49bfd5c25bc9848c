package registrar_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// Issue 18 item 1: a client that connects and sends nothing must not stall
// the control loop. After the socket is deleted, a new one answers while the
// silent client is still connected, and /healthz stays 200.
func TestSilentClientDoesNotStallRecreation(t *testing.T) {
	s := startServed(t, nil)
	silentClient(t, s.sock)
	if err := os.Remove(s.sock); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, s.r, "a new registration socket while the silent client is connected", servingNew(s.r, s.sock, "deleted", 1))
	if code, body := get(s.r, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q with a silent client connected, want 200", code, body)
	}
}

// Issue 18 item 1: a call held open (its body never sent) on a socket the
// kubelet rejected must not keep the registrar from re-creating the socket.
func TestHeldCallDoesNotStallRetryAfterRejection(t *testing.T) {
	s := startServed(t, nil)
	holdCall(t, s.sock, "/pluginregistration.Registration/NotifyRegistrationStatus")
	if err := registrartest.NotifySocket(context.Background(), s.sock, false, "rejected by the test"); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, s.r, "the socket re-created after the rejection", servingNew(s.r, s.sock, "rejected", 1))
}

// Issue 18 item 1 and issue 13 item 3: Run ends within ShutdownTimeout plus
// a second after its context ends, even with a call held open and a silent
// connection. (The limit is a hang guard, not a speed test.)
func TestRunEndsWithinShutdownTimeout(t *testing.T) {
	const grace = 300 * time.Millisecond
	s := startServed(t, func(o *registrar.Options) { o.ShutdownTimeout = grace })
	holdCall(t, s.sock, "/pluginregistration.Registration/GetInfo")
	silentClient(t, s.sock)

	start := time.Now()
	s.run.cancel()
	select {
	case <-s.run.done:
	case <-time.After(grace + time.Second):
		t.Fatalf("Run still running %s after its context ended (ShutdownTimeout %s)", time.Since(start).Round(time.Millisecond), grace)
	}
	if _, err := os.Lstat(s.sock); err == nil {
		t.Error("the registration socket is still there after Run returned")
	}
}

// silentClient connects to the unix socket at path and sends nothing until
// the test ends.
func silentClient(t *testing.T, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
}

// holdCall starts a call of method on the gRPC socket at path whose body
// never comes (registrartest.HoldCall), held open until the test ends.
func holdCall(t *testing.T, path, method string) {
	t.Helper()
	held, err := registrartest.HoldCall(path, method)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
}
