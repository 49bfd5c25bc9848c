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
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	r, _ := startRegistrar(t, e, nil, nil)
	sock := e.regSock(stubName)
	awaitStatus(t, r, "registration socket", serving(sock))

	silent, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, r, "a new registration socket while the silent client is connected", servingNew(r, sock, "deleted", 1))
	if code, body := get(r, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q with a silent client connected, want 200", code, body)
	}
}

// Issue 18 item 1: a call held open (its body never sent) on a socket the
// kubelet rejected must not keep the registrar from re-creating the socket.
func TestHeldCallDoesNotStallRetryAfterRejection(t *testing.T) {
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	r, _ := startRegistrar(t, e, nil, nil)
	sock := e.regSock(stubName)
	awaitStatus(t, r, "registration socket", serving(sock))

	held, err := registrartest.HoldCall(sock, "/pluginregistration.Registration/NotifyRegistrationStatus")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := registrartest.NotifySocket(context.Background(), sock, false, "rejected by the test"); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, r, "the socket re-created after the rejection", servingNew(r, sock, "rejected", 1))
}

// Issue 18 item 1 and issue 13 item 3: Run ends within ShutdownTimeout plus
// a second after its context ends, even with a call held open and a silent
// connection. (The limit is a hang guard, not a speed test.)
func TestRunEndsWithinShutdownTimeout(t *testing.T) {
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	const grace = 300 * time.Millisecond
	r, run := startRegistrar(t, e, nil, func(o *registrar.Options) { o.ShutdownTimeout = grace })
	sock := e.regSock(stubName)
	awaitStatus(t, r, "registration socket", serving(sock))
	held, err := registrartest.HoldCall(sock, "/pluginregistration.Registration/GetInfo")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	silent, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	start := time.Now()
	run.cancel()
	select {
	case <-run.done:
	case <-time.After(grace + time.Second):
		t.Fatalf("Run still running %s after its context ended (ShutdownTimeout %s)", time.Since(start).Round(time.Millisecond), grace)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the registration socket is still there after Run returned")
	}
}
