package registrar_test

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
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
	var logs logBuffer
	r := newRegistrar(t, nil, e, &logs, func(o *registrar.Options) { o.HTTPEndpoint = "127.0.0.1:0" })
	r.SetHTTPTimeouts(10 * guard)
	start(t, r.Run)
	var addr string
	eventually(t, "the HTTP endpoint's address in the log", func() bool {
		m := regexp.MustCompile(`msg="serving health and metrics" .*endpoint=(\S+)`).FindStringSubmatch(logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	eventually(t, "registration socket", func() bool { return answers(e.regSock(stubName)) })
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
