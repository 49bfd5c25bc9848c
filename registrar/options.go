package registrar

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Lower bounds of the durations in Options. Below them the registrar does
// not work better, it churns: each bound says why.
const (
	// MinTimeout: a call to a local driver over a unix socket takes
	// milliseconds, but a node under load stalls processes for tens of
	// milliseconds; below this a healthy driver fails Probe.
	MinTimeout = 100 * time.Millisecond
	// MinConnectionTimeout (unless 0, wait forever): a driver container
	// needs at least this long to start and create its socket.
	MinConnectionTimeout = time.Second
	// MinKubeletWait: the kubelet's plugin manager reconciles every second
	// and registers plugins one at a time; re-creating the socket sooner than
	// several of its rounds interrupts a registration in progress.
	MinKubeletWait = 10 * time.Second
	// MinRegistrationRetryMax: the backoff starts at 1 s; a cap below its
	// first step would re-create the socket in a busy loop.
	MinRegistrationRetryMax = time.Second
)

// DefaultShutdownTimeout is Options.ShutdownTimeout's default. The
// registrar's own gRPC handlers answer in microseconds; what it bounds is a
// client that does not finish its call.
const DefaultShutdownTimeout = time.Second

// checkLimits sets ShutdownTimeout's default and checks the lower bounds of
// the durations and the form of HTTPEndpoint. Errors are *csiplugin.ValidationError
// naming the Options field.
func checkLimits(o *Options) error {
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	for _, d := range []struct {
		field string
		v     time.Duration
		min   time.Duration
		zero  bool // 0 is allowed and means "no limit"
	}{
		{"Options.Timeout", o.Timeout, MinTimeout, false},
		{"Options.ConnectionTimeout", o.ConnectionTimeout, MinConnectionTimeout, true},
		{"Options.KubeletWait", o.KubeletWait, MinKubeletWait, false},
		{"Options.RegistrationRetryMax", o.RegistrationRetryMax, MinRegistrationRetryMax, false},
	} {
		if d.v < 0 || d.v == 0 && d.zero {
			continue // negative: refused by New with its own message
		}
		if d.v < d.min {
			rule := fmt.Sprintf("must be at least %s", d.min)
			if d.zero {
				rule += " (or 0 for no limit)"
			}
			return &csiplugin.ValidationError{What: d.field, Value: d.v.String(), Rule: rule,
				Fix: fmt.Sprintf("use %s or more; shorter values make the registrar churn, not react faster", d.min)}
		}
	}
	if o.ShutdownTimeout < 0 {
		return &csiplugin.ValidationError{What: "Options.ShutdownTimeout", Value: o.ShutdownTimeout.String(),
			Rule: "must not be negative", Fix: "use a duration such as 1s"}
	}
	return checkHTTPEndpoint(o.HTTPEndpoint)
}

// checkHTTPEndpoint checks that a non-empty endpoint is host:port with a
// numeric port, as net.Listen("tcp") takes it.
func checkHTTPEndpoint(ep string) error {
	if ep == "" {
		return nil
	}
	bad := func(rule string) error {
		return &csiplugin.ValidationError{What: "Options.HTTPEndpoint", Value: ep, Rule: rule,
			Fix: "use host:port or :port, e.g. :9809 or 127.0.0.1:9809"}
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return bad("must be a TCP address host:port")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return bad(fmt.Sprintf("has port %q; the port must be a number from 0 to 65535", port))
	}
	if host != "" && net.ParseIP(host) == nil && !validHostName(host) {
		return bad(fmt.Sprintf("has host %q, which is neither an IP address nor a host name", host))
	}
	return nil
}

// validHostName reports whether h looks like a DNS name (letters, digits,
// '-' and '.'); whether it resolves is up to net.Listen.
func validHostName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !csiplugin.IsAlnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
