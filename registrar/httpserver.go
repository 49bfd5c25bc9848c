package registrar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"
)

// httpLimits bound what a client of the HTTP endpoint can hold. The endpoint
// is reachable from the pod network and the registrar's memory limit is
// small (each open connection costs ~15 kB), so a client can neither keep
// a connection open without finishing a request (ReadHeader) or between
// requests (Idle), nor make the server keep more than maxConns connections:
// beyond that, the oldest connection without a request in progress is
// closed. A new connection (a kubelet probe) is always
// accepted and served at once; no number of hostile clients makes it wait.
type httpLimits struct {
	readHeader time.Duration // from accepting to the end of the headers
	read       time.Duration // the whole request (bodies are empty)
	write      time.Duration // /readyz calls Probe (Options.Timeout); pprof profiles need ?seconds= below this
	idle       time.Duration // a kept-alive connection without a request; probes and scrapes reconnect
	maxConns   int           // open connections kept; more close the oldest one without a request in progress
	shutdown   time.Duration // in-flight requests at exit, then connections are closed
}

var defaultHTTPLimits = httpLimits{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	write:      15 * time.Second,
	idle:       5 * time.Second,
	maxConns:   100,
	shutdown:   time.Second,
}

// livenessTimeout is how long /healthz waits for the control loop to answer.
// The loop never waits for the driver or the kubelet, so only a loop that is
// stuck or gone makes it expire.
const livenessTimeout = 5 * time.Second

func (r *Registrar) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", r.serveHealthz)
	mux.HandleFunc("GET /readyz", r.serveReadyz)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { r.metrics.serve(w, r.Status().Stage) })
	if r.opts.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// serveHealthz answers 200 when the control loop answers a ping: waiting for
// the driver, backing off after a rejection and waiting for the kubelet are
// all healthy. Only a loop that is stuck or gone fails it.
func (r *Registrar) serveHealthz(w http.ResponseWriter, req *http.Request) {
	reply := make(chan struct{})
	ctx, cancel := context.WithTimeout(req.Context(), livenessTimeout)
	defer cancel()
	select {
	case r.ping <- reply:
		<-reply
		fmt.Fprintf(w, "ok: %s\n", r.Status())
	case <-r.exited:
		http.Error(w, "control loop has ended", http.StatusServiceUnavailable)
	case <-ctx.Done():
		http.Error(w, "control loop not responding", http.StatusServiceUnavailable)
	}
}

// serveReadyz answers 200 only when the kubelet confirmed the registration on
// the current socket and the driver answers Probe, which it asks itself for
// a fresh answer. It writes nothing the control loop owns. The body names
// the stage.
func (r *Registrar) serveReadyz(w http.ResponseWriter, req *http.Request) {
	st := r.Status()
	// Ready: registered, or standing by as a usable fallback (Status.Fallback),
	// and the driver answers Probe now.
	if st.Stage != StageRegistered && !(st.Stage == StageStandingBy && st.Fallback) {
		http.Error(w, st.String(), http.StatusServiceUnavailable)
		return
	}
	if err := r.driver.Probe(req.Context()); err != nil {
		http.Error(w, st.Stage.String()+", but the driver does not answer Probe: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if check := r.opts.ReadyCheck; check != nil {
		if err := check(); err != nil {
			http.Error(w, st.Stage.String()+", but "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, st.String())
}

// startHTTP listens on Options.HTTPEndpoint and returns the function that
// shuts the server down (within the shutdown limit).
func (r *Registrar) startHTTP() (stop func(), err error) {
	ln, err := net.Listen("tcp", r.opts.HTTPEndpoint)
	if err != nil {
		return nil, &OptionError{Option: OptionHTTPEndpoint, Value: r.opts.HTTPEndpoint, Op: "listen on", Err: err,
			Fix: "use a free port, or an address of this host"}
	}
	lim := r.httpLimits
	conns := newConnTable(lim.maxConns)
	srv := &http.Server{
		Handler:           r.handler(),
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		ConnState:         conns.track,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("HTTP server stopped", "endpoint", r.opts.HTTPEndpoint, "err", err)
		}
	}()
	r.log.Info("serving health and metrics", "endpoint", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), lim.shutdown)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close() // Shutdown gave up on requests still running: close their connections
		}
		<-done
	}, nil
}

// connTable keeps at most max connections of the HTTP server open. When a
// new one makes it max+1, it closes the oldest connection without a request
// in progress (a slowloris still sending its headers, or a kept-alive
// connection between requests). The new connection is the youngest, so it
// is served; a request being handled is never cut.
type connTable struct {
	max   int
	mu    sync.Mutex
	seq   uint64
	conns map[net.Conn]connEntry
}

type connEntry struct {
	accepted uint64 // order of acceptance; lower is older
	active   bool   // a request is being handled
}

func newConnTable(max int) *connTable {
	return &connTable{max: max, conns: make(map[net.Conn]connEntry, max+1)}
}

// track is the server's ConnState hook. StateNew is reported by the accept
// loop before the connection is served, so the table never holds more than
// max+1 connections.
func (t *connTable) track(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	var evict net.Conn
	e, known := t.conns[c]
	switch st {
	case http.StateNew:
		t.seq++
		t.conns[c] = connEntry{accepted: t.seq}
		if len(t.conns) > t.max {
			evict = t.oldestWaiting(c)
			delete(t.conns, evict)
		}
	case http.StateActive, http.StateIdle:
		if known { // not one closed to make room
			e.active = st == http.StateActive
			t.conns[c] = e
		}
	case http.StateHijacked, http.StateClosed:
		delete(t.conns, c)
	}
	t.mu.Unlock()
	if evict != nil {
		evict.Close() // its goroutine ends with a read error and reports StateClosed
	}
}

// oldestWaiting returns the oldest connection other than except without a
// request in progress; nil if every other is active.
func (t *connTable) oldestWaiting(except net.Conn) net.Conn {
	var oldest net.Conn
	var accepted uint64
	for c, e := range t.conns {
		if c != except && !e.active && (oldest == nil || e.accepted < accepted) {
			oldest, accepted = c, e.accepted
		}
	}
	return oldest
}
