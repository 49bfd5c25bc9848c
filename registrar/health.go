package registrar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"golang.org/x/net/netutil"
)

// Limits of the HTTP endpoint. It is reachable from the pod network, and the
// registrar's memory limit is small (each open connection costs ~15 kB): a
// client cannot hold more than httpMaxConns connections, nor keep one open
// without sending a request for longer than httpIdleTimeout.
const (
	httpReadHeaderTimeout = 5 * time.Second  // from accepting to the end of the headers
	httpReadTimeout       = 10 * time.Second // the whole request (bodies are empty)
	httpWriteTimeout      = 15 * time.Second // /readyz calls Probe (Options.Timeout); pprof profiles need ?seconds= below this
	httpIdleTimeout       = 5 * time.Second  // a kept-alive connection without a request; probes and scrapes reconnect
	httpMaxConns          = 100              // further connections wait in the kernel's backlog
	httpShutdownTimeout   = time.Second      // in-flight requests at exit, then connections are closed
)

// livenessTimeout is how long /healthz waits for the control loop to answer.
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
// the current socket and the driver answers Probe. The body names the stage.
func (r *Registrar) serveReadyz(w http.ResponseWriter, req *http.Request) {
	st := r.Status()
	if st.Stage != StageRegistered {
		http.Error(w, st.String(), http.StatusServiceUnavailable)
		return
	}
	if err := r.driver.Probe(req.Context()); err != nil {
		r.metrics.setReachable(false)
		http.Error(w, "registered, but the driver does not answer Probe: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	r.metrics.setReachable(true)
	fmt.Fprintln(w, st.String())
}

// startHTTP listens on Options.HTTPEndpoint and returns the function that
// shuts the server down (within httpShutdownTimeout).
func (r *Registrar) startHTTP() (stop func(), err error) {
	ln, err := net.Listen("tcp", r.opts.HTTPEndpoint)
	if err != nil {
		return nil, fmt.Errorf("listen on Options.HTTPEndpoint %s: %w; use a free port, or an address of this host", r.opts.HTTPEndpoint, err)
	}
	srv := &http.Server{
		Handler:           r.handler(),
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
	}
	ln = netutil.LimitListener(ln, httpMaxConns)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("HTTP server stopped", "endpoint", r.opts.HTTPEndpoint, "err", err)
		}
	}()
	r.log.Info("serving health and metrics", "endpoint", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close() // Shutdown gave up on requests still running: close their connections
		}
		<-done
	}, nil
}
