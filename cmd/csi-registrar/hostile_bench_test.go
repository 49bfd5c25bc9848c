//go:build bench

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// ---------------------------------------------------------------------------
// Figure 11 (issue 22 item 5): the health endpoint under hostile clients.
// Each run starts a registrar with --http-endpoint, registers it, opens
// BENCH_HOSTILE_CONNS connections to that endpoint (half slowloris, half
// idle kept-alive after one request; registrartest.OpenHostileHTTP), then,
// with them open, sends 50 probes of /healthz (and, for ours, 50 of
// /readyz), each on a new connection with the kubelet's default 1 s probe
// timeout (a probe that times out counts as 1 s). It then watches when the
// registrar closes the hostile connections, and reads the registrar's peak
// RSS (VmHWM). The registrar container's memory limit in manifests/base is
// 32 MiB.

const manifestMemoryLimit = 32 << 20

func TestBenchHealthUnderHostileConnections(t *testing.T) {
	ims := impls(t)
	runs := benchEnvInt("BENCH_HOSTILE_RUNS", 3)
	n := benchEnvInt("BENCH_HOSTILE_CONNS", 1000)
	const probes = 50
	const closeWindow = 20 * time.Second
	dir := benchDir(t)
	driverSock := startBenchDriver(t, dir, "hostile.csi.example.com")
	type result struct{ healthzP99, readyzP99, failed, openAt15, lastClose, hwm []float64 }
	res := perImpl[result](ims)
	for i := range runs {
		for _, im := range alternate(ims, i) {
			regDir, regSock := benchRegDir(dir, im, i, "hostile.csi.example.com")
			addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			p := startQuiet(t, im.bin, im.registerArgs(driverSock, regDir, "--http-endpoint="+addr)...)
			kubeletRegister(t, regSock)
			waitFor(t, "/healthz of "+im.name, func() bool { _, err := probeOnce(addr, "/healthz"); return err == nil })

			conns, err := registrartest.OpenHostileHTTP(addr, n)
			if err != nil {
				t.Fatal(err)
			}
			opened := time.Now()
			closedAt := watchClosed(conns)

			var failed int
			latencies := func(path string) []time.Duration {
				var lat []time.Duration
				for range probes {
					d, err := probeOnce(addr, path)
					if err != nil {
						failed++
						d = time.Second
					}
					lat = append(lat, d)
				}
				return lat
			}
			r := res[im.name]
			hz := latencies("/healthz")
			t.Logf("%s run %d: /healthz probes 1-5 %v, slowest %v", im.name, i, hz[:5], p99(hz))
			r.healthzP99 = append(r.healthzP99, ms(p99(hz)))
			if !im.upstream() { // upstream serves no /readyz
				r.readyzP99 = append(r.readyzP99, ms(p99(latencies("/readyz"))))
			}
			r.failed = append(r.failed, float64(failed))

			time.Sleep(time.Until(opened.Add(15 * time.Second)))
			open15 := 0
			for _, c := range closedAt() {
				if c.IsZero() {
					open15++
				}
			}
			r.openAt15 = append(r.openAt15, float64(open15))
			time.Sleep(time.Until(opened.Add(closeWindow)))
			last := time.Duration(0)
			for _, c := range closedAt() {
				if c.IsZero() {
					last = closeWindow + time.Second // never, within the window
					break
				}
				last = max(last, c.Sub(opened))
			}
			r.lastClose = append(r.lastClose, last.Seconds())
			s := sample(t, p.pid())
			r.hwm = append(r.hwm, s.hwm)
			for _, c := range conns {
				c.Close()
			}
			p.stop()
			t.Logf("%s run %d: /healthz p99 %.1f ms, %d failed probes, %d of %d hostile connections open after 15 s, last closed %s, VmHWM %.1f MB",
				im.name, i, r.healthzP99[len(r.healthzP99)-1], failed, open15, n, last, s.hwm/1e6)
		}
	}
	ours, up := res["ours"], res["upstream"]
	if up == nil {
		up = &result{}
	}
	load := fmt.Sprintf("%d hostile connections (half slowloris, half idle kept-alive)", n)
	record(t, row{fig: "11a", what: "/healthz p99 of 50 probes with " + load, unit: "ms", ours: ours.healthzP99, up: up.healthzP99,
		goal: "≤ 100 ms", met: maxAtMost(100)})
	record(t, row{fig: "11b", what: "/readyz p99 of 50 probes, same load (upstream has no /readyz)", unit: "ms", ours: ours.readyzP99,
		upNote: "no /readyz", goal: "≤ 100 ms", met: maxAtMost(100)})
	record(t, row{fig: "11c", what: "probes failed (1 s timeout) of 100, same load", ours: ours.failed, up: up.failed, goal: "0", met: maxAtMost(0)})
	record(t, row{fig: "11d", what: "hostile connections still open 15 s after they were opened", ours: ours.openAt15, up: up.openAt15,
		goal: "0", met: maxAtMost(0)})
	lastRow := row{fig: "11e", what: fmt.Sprintf("last hostile connection closed by the registrar (%s+1 s = never within %s)", closeWindow, closeWindow),
		unit: "s", ours: ours.lastClose, up: up.lastClose, goal: "≤ 15 s", met: maxAtMost(15)}
	record(t, lastRow)
	record(t, row{fig: "11f", what: "registrar peak RSS (VmHWM) under that load; the manifest's limit is 32 MiB", unit: "bytes", ours: ours.hwm, up: up.hwm,
		goal: "≤ 32 MiB", met: maxAtMost(manifestMemoryLimit)})
}

// probeOnce GETs path on a new connection with the kubelet's default probe
// timeout (1 s) and returns how long the answer took; a non-200 answer is
// an error.
func probeOnce(addr, path string) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	rsp, err := client.Get("http://" + addr + path)
	if err != nil {
		return time.Since(start), err
	}
	io.Copy(io.Discard, rsp.Body)
	rsp.Body.Close()
	d := time.Since(start)
	if rsp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("%s: %s", path, rsp.Status)
	}
	return d, nil
}

// p99 is the 99th percentile of xs (the largest of 50).
func p99(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(0.99*float64(len(s))))]
}

// watchClosed reads every connection until the server closes it and returns
// a function that reports when each was closed (zero: still open).
func watchClosed(conns []net.Conn) func() []time.Time {
	var mu sync.Mutex
	at := make([]time.Time, len(conns))
	for i, c := range conns {
		go func() {
			io.Copy(io.Discard, c) // until EOF or reset (or our own Close)
			mu.Lock()
			at[i] = time.Now()
			mu.Unlock()
		}()
	}
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(at)
	}
}
