package registrar_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// Issue 22 item 5: no client can starve the health endpoints. While 1000
// hostile connections (half slowloris, half idle kept-alive) are open, and
// with the server's own timeouts set beyond this test's hang guard so that
// none of them is released by a timeout, /healthz and /readyz are served.
// The assertion is an ordering, not a time: the probes are answered before
// the test lets go of any hostile connection.
func TestHealthServedBehindHostileConnections(t *testing.T) {
	const hostile = 1000
	const guard = time.Minute // hang guard only; the server's timeouts are longer
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	r, addr := startWithHTTP(t, e, 10*guard)
	awaitStatus(t, r, "registration socket", serving(e.regSock(stubName)))
	registerNow(t, r, e.regSock(stubName))

	conns, err := registrartest.OpenHostileHTTP(addr, hostile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	client := &http.Client{Timeout: guard, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/readyz", "/healthz"} {
		rsp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("%s with %d hostile connections open: %v", path, hostile, err)
		}
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			t.Fatalf("%s with %d hostile connections open = %d, want 200", path, hostile, rsp.StatusCode)
		}
	}
}
