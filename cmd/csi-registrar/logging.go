package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2/textlogger"
)

// loggingFlags are the logging flags of Kubernetes components
// (k8s.io/component-base/logs/api/v1), as upstream's node-driver-registrar
// accepts them, on every subcommand that logs.
func loggingFlags() []cli.Flag {
	const cat = "Logging"
	flags := []cli.Flag{
		&cli.StringFlag{Name: "v", EnvVars: env("v"), Category: cat,
			Usage: "log verbosity, as klog's -v: 0 = lifecycle events, 4 and more = debug (GetInfo calls, retries)"},
		&cli.StringFlag{Name: "logging-format", Value: "text", EnvVars: env("logging-format"), Category: cat,
			Usage: "log format: text (klog's header format) or json (the JSON format of Kubernetes components)"},
		&cli.StringFlag{Name: "vmodule", EnvVars: env("vmodule"), Category: cat,
			Usage: "pattern=N,...: accepted for compatibility (text format only, as upstream), ignored: verbosity is global"},
		&cli.DurationFlag{Name: "log-flush-frequency", Value: logFlushFrequencyDefault, EnvVars: env("log-flush-frequency"), Category: cat,
			Usage: "accepted for compatibility (must be > 0, as upstream), ignored: logs are written unbuffered"},
	}
	// The alpha options of both formats, each accepted at its default only.
	const alpha = " (an alpha option behind a feature gate it cannot enable)"
	for _, format := range []string{"text", "json"} {
		split, buffer := "log-"+format+"-split-stream", "log-"+format+"-info-buffer-size"
		flags = append(flags,
			&cli.BoolFlag{Name: split, EnvVars: env(split), Category: cat, Usage: "accepted at its default, false; upstream refuses true" + alpha},
			&cli.StringFlag{Name: buffer, Value: "0", EnvVars: env(buffer), Category: cat, Usage: "accepted at its default, 0; upstream refuses other sizes" + alpha})
	}
	return flags
}

// logFlushFrequencyDefault is component-base's default --log-flush-frequency.
const logFlushFrequencyDefault = 5 * time.Second

// legacyKlogFlags are klog flags that older manifests still pass. They are
// accepted and logged as ignored, so such manifests keep working.
func legacyKlogFlags() []cli.Flag {
	hidden := func(name string) cli.Flag { return &cli.StringFlag{Name: name, Hidden: true, EnvVars: env(name)} }
	hiddenBool := func(name string) cli.Flag { return &cli.BoolFlag{Name: name, Hidden: true, EnvVars: env(name)} }
	return []cli.Flag{
		hiddenBool("logtostderr"), hiddenBool("alsologtostderr"), hiddenBool("add_dir_header"),
		hiddenBool("skip_headers"), hiddenBool("skip_log_headers"), hiddenBool("one_output"),
		hidden("log_dir"), hidden("log_file"), hidden("log_file_max_size"), hidden("stderrthreshold"),
		hidden("log_backtrace_at"),
	}
}

// logConfig is what the logging flags ask for.
type logConfig struct {
	v      int    // klog verbosity: V(n) lines with n ≤ v are written
	format string // "text" or "json"
}

// parseLogConfig checks the logging flags as component-base's
// ValidateAndApply does in upstream's node-driver-registrar: whatever it
// refuses is refused here, with the rule and the fix.
func parseLogConfig(c *cli.Context) (logConfig, error) {
	var lc logConfig
	if s := c.String("v"); s != "" {
		// klog's -v is an unsigned 31-bit number.
		n, err := strconv.ParseUint(s, 10, 31)
		if err != nil {
			return lc, badFlag("v", s, fmt.Sprintf("must be a whole number from 0 to %d (klog verbosity)", math.MaxInt32),
				"use e.g. -v=2 (lifecycle) or -v=5 (debug)")
		}
		lc.v = int(n)
	}
	switch lc.format = c.String("logging-format"); lc.format {
	case "text", "json":
	default:
		return lc, badFlag("logging-format", lc.format, "must be text or json", "use --logging-format=text (klog's format) or --logging-format=json")
	}
	if vm := c.String("vmodule"); vm != "" {
		if lc.format != "text" {
			return lc, badFlag("vmodule", vm, "is only supported with --logging-format=text (as upstream)", "drop --vmodule")
		}
		if err := checkVModule(vm); err != nil {
			return lc, badFlag("vmodule", vm, err.Error(), "use pattern=N,... e.g. --vmodule=registrar*=5, or drop it")
		}
	}
	if d := c.Duration("log-flush-frequency"); d <= 0 {
		return lc, badFlag("log-flush-frequency", d.String(), "must be greater than zero (as upstream)", "drop it: logs are written unbuffered here")
	}
	for _, f := range []string{"log-text-split-stream", "log-json-split-stream"} {
		if c.Bool(f) {
			return lc, badFlag(f, "true", "is an alpha option of Kubernetes logging behind the LoggingAlphaOptions feature gate, "+
				"which node-driver-registrar refuses too (it has no --feature-gates flag)", "drop it: every log line goes to stderr")
		}
	}
	for _, f := range []string{"log-text-info-buffer-size", "log-json-info-buffer-size"} {
		if s := c.String(f); !isZeroQuantity(s) {
			return lc, badFlag(f, s, "only 0, the default, is accepted: a buffer size is an alpha option of Kubernetes logging behind the "+
				"LoggingAlphaOptions feature gate, which node-driver-registrar refuses too", "drop it: logs are written unbuffered")
		}
	}
	return lc, nil
}

// commandLogger is what a command that logs does first: it checks that the
// named flags are not empty, then builds the logger its logging flags ask
// for, writing to c.App.ErrWriter.
func commandLogger(c *cli.Context, required ...string) (*slog.Logger, logConfig, error) {
	if err := notEmpty(c, required...); err != nil {
		return nil, logConfig{}, err
	}
	lc, err := parseLogConfig(c)
	if err != nil {
		return nil, lc, err
	}
	return newLogger(lc, c.App.ErrWriter), lc, nil
}

// checkVModule checks the syntax klog and component-base accept for --vmodule.
func checkVModule(s string) error {
	for _, pat := range strings.Split(s, ",") {
		if pat == "" {
			continue
		}
		p, n, ok := strings.Cut(pat, "=")
		if !ok || p == "" || n == "" || strings.Contains(n, "=") {
			return fmt.Errorf("%q does not have the pattern=N format", pat)
		}
		if _, err := strconv.ParseUint(n, 10, 31); err != nil {
			return fmt.Errorf("the verbosity in %q is not a whole number from 0 to %d", pat, math.MaxInt32)
		}
	}
	return nil
}

// isZeroQuantity reports whether s is a Kubernetes quantity of zero, as
// resource.ParseQuantity reads it: 0, +0, 0.0, .0, 0Ki, 0M, 0e3, ...
func isZeroQuantity(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	i, zeros, dot := 0, 0, false
	for ; i < len(s); i++ {
		if s[i] == '0' {
			zeros++
		} else if s[i] == '.' && !dot {
			dot = true
		} else {
			break
		}
	}
	if zeros == 0 {
		return false
	}
	rest := s[i:]
	switch rest {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E":
		return true
	}
	// An exponent: e or E, an optional sign, digits.
	if rest[0] != 'e' && rest[0] != 'E' {
		return false
	}
	exp := rest[1:]
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	return exp != "" && strings.Trim(exp, "0123456789") == ""
}

// newLogger builds the logger the flags ask for, writing to w.
//
// text is klog's text format, written by k8s.io/klog/v2/textlogger through
// go-logr's slog bridge: I1123 07:06:37.611000       1 registrar.go:123] "msg" key="value".
// json is the JSON format of Kubernetes components (jsonHandler).
// Verbosity v enables slog level -v and above, as klog's V(n) ≤ v: -v=4
// enables Debug.
func newLogger(lc logConfig, w io.Writer) *slog.Logger {
	if lc.format == "json" {
		return slog.New(newJSONHandler(w, lc.v))
	}
	return slog.New(newTextHandler(w, lc.v))
}

// newTextHandler returns klog's text format through textlogger. The
// textlogger is configured here and nowhere else: nothing process-wide is set.
func newTextHandler(w io.Writer, v int, opts ...textlogger.ConfigOption) slog.Handler {
	opts = append([]textlogger.ConfigOption{textlogger.Verbosity(v), textlogger.Output(w)}, opts...)
	return logr.ToSlogHandler(textlogger.NewLogger(textlogger.NewConfig(opts...)))
}

// logIgnored logs each flag that was set but has no effect here: the
// logging flags accepted for compatibility, the legacy klog flags, and the
// flags named in reasons.
func logIgnored(c *cli.Context, log *slog.Logger, extra map[string]string) {
	reasons := map[string]string{
		"vmodule":                   "verbosity is global",
		"log-flush-frequency":       "logs are written unbuffered",
		"log-text-split-stream":     "every line goes to stderr",
		"log-json-split-stream":     "every line goes to stderr",
		"log-text-info-buffer-size": "logs are written unbuffered",
		"log-json-info-buffer-size": "logs are written unbuffered",
	}
	maps.Copy(reasons, extra)
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if why, ok := reasons[name]; ok && c.IsSet(name) {
			log.Info("flag accepted and ignored", "flag", "--"+name, "value", fmt.Sprint(c.Value(name)), "reason", why)
		}
	}
	for _, f := range legacyKlogFlags() {
		if name := f.Names()[0]; c.IsSet(name) {
			log.Info("flag accepted and ignored", "flag", "--"+name, "reason", "klog flag; logs go to stderr in --logging-format")
		}
	}
}
