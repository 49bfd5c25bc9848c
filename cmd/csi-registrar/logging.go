package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
)

// loggingFlags are the Kubernetes logging flags every subcommand accepts.
func loggingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "v", Usage: "log verbosity: 0 = lifecycle events, 4 and more = debug (GetInfo calls, retries)", Category: "Logging"},
		&cli.StringFlag{Name: "logging-format", Value: "text", Usage: "log format: text or json", Category: "Logging"},
		&cli.StringFlag{Name: "vmodule", Usage: "accepted for compatibility, ignored: verbosity is global", Category: "Logging"},
		&cli.DurationFlag{Name: "log-flush-frequency", Usage: "accepted for compatibility, ignored: logs are not buffered", Category: "Logging"},
	}
}

// legacyKlogFlags are klog flags that older manifests still pass. They are
// accepted and logged as ignored, so such manifests keep working.
func legacyKlogFlags() []cli.Flag {
	hidden := func(name string) cli.Flag { return &cli.StringFlag{Name: name, Hidden: true} }
	hiddenBool := func(name string) cli.Flag { return &cli.BoolFlag{Name: name, Hidden: true} }
	return []cli.Flag{
		hiddenBool("logtostderr"), hiddenBool("alsologtostderr"), hiddenBool("add_dir_header"),
		hiddenBool("skip_headers"), hiddenBool("skip_log_headers"), hiddenBool("one_output"),
		hidden("log_dir"), hidden("log_file"), hidden("log_file_max_size"), hidden("stderrthreshold"),
		hidden("log_backtrace_at"),
	}
}

// newLogger builds the slog logger the flags ask for. Verbosity v maps to
// slog level -v, so -v=4 enables Debug.
func newLogger(c *cli.Context, w io.Writer) (*slog.Logger, error) {
	v := c.Int("v")
	if v < 0 {
		return nil, badFlag("v", fmt.Sprint(v), "must be 0 or more", "use e.g. --v=2")
	}
	opts := &slog.HandlerOptions{Level: slog.Level(-v)}
	var h slog.Handler
	switch f := c.String("logging-format"); f {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, badFlag("logging-format", f, "must be text or json", "use --logging-format=json")
	}
	return slog.New(h), nil
}

// logIgnored logs each flag that was set but has no effect here.
func logIgnored(c *cli.Context, log *slog.Logger, reasons map[string]string) {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if why, ok := reasons[name]; ok && c.IsSet(name) {
			log.Info("flag accepted and ignored", "flag", "--"+name, "value", c.Value(name), "reason", why)
		}
	}
	for _, f := range legacyKlogFlags() {
		if name := f.Names()[0]; c.IsSet(name) {
			log.Info("flag accepted and ignored", "flag", "--"+name, "reason", "klog flag; logs go to stderr through log/slog")
		}
	}
}
