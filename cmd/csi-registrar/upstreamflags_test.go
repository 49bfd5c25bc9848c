package main

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// upstreamFlags is the flag set of node-driver-registrar v2.17/v2.18: its own
// flags, csi-lib-utils' --automaxprocs and component-base's logging flags
// (logsapi.AddGoFlags with the json format registered).
var upstreamFlags = []string{
	"csi-address", "kubelet-registration-path", "plugin-registration-path", "timeout", "connection-timeout",
	"health-port", "http-endpoint", "enable-pprof", "mode", "version", "automaxprocs",
	"v", "vmodule", "logging-format", "log-flush-frequency",
	"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size",
}

// TestUpstreamFlagSurface runs every upstream flag with the values upstream
// accepts (exit 0, the options they mean) and with values upstream refuses
// too (exit 2 naming the rule), in both invocation forms.
func TestUpstreamFlagSurface(t *testing.T) {
	const (
		addr = "/csi/csi.sock"
		kp   = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock"
	)
	def := defaultRegisterOptions(addr, kp)
	with := func(f func(*registrar.Options)) registrar.Options {
		o := def
		f(&o)
		return o
	}
	type tc struct {
		want    *registrar.Options // nil: the registrar must not start
		code    int
		stderr  []string // lines that must be logged (key=value matches a field), or in the error
		debug   bool
		version bool // prints the version on stdout
	}
	ok := func(o registrar.Options, stderr ...string) tc { return tc{want: &o, stderr: stderr} }
	cases := map[string]tc{
		// --mode: upstream's default is empty; every value but the probe mode registers.
		"mode empty":        ok(def),
		"mode registration": ok(def),
		"mode other":        ok(def, "unknown --mode value", "mode=node"),
		// No registrar runs, so the probe fails (the exec tests cover the rest).
		"mode probe": {code: exitError, stderr: []string{"no registrar is running in this container", "no state file " + noStateFile}},
		// --health-port: ≤ 0 disables.
		"health-port -1":   ok(def),
		"health-port 0":    ok(def),
		"health-port 9809": ok(with(func(o *registrar.Options) { o.HTTPEndpoint = ":9809" })),
		"health-port with http-endpoint": {code: exitBadInput,
			stderr: []string{"--health-port", "cannot be combined with --http-endpoint"}},
		"http-endpoint": ok(with(func(o *registrar.Options) { o.HTTPEndpoint = ":8080" })),
		// --kubelet-registration-path as charts build it.
		"kubelet-registration-path //": ok(def, "--kubelet-registration-path cleaned",
			"given=/var/lib/kubelet//plugins/csi-hostpath/csi.sock", "kubeletRegistrationPath="+kp),
		"kubelet-registration-path trailing /": ok(def, "--kubelet-registration-path cleaned",
			"given="+kp+"/", "kubeletRegistrationPath="+kp),
		"kubelet-registration-path /./": ok(def, "--kubelet-registration-path cleaned"),
		"csi-address":                   ok(with(func(o *registrar.Options) { o.CSIAddress = "unix:///csi/other.sock" })),
		"plugin-registration-path": ok(with(func(o *registrar.Options) {
			o.PluginRegistrationPath = "/var/lib/kubelet/plugins_registry"
		})),
		"timeout":            ok(with(func(o *registrar.Options) { o.Timeout = 3 * time.Second })),
		"timeout no unit":    {code: exitBadInput, stderr: []string{"--timeout", `"3"`, "a duration needs a unit", "e.g. --timeout=3s"}},
		"connection-timeout": ok(with(func(o *registrar.Options) { o.ConnectionTimeout = 30 * time.Second })),
		"enable-pprof":       ok(with(func(o *registrar.Options) { o.EnablePprof = true })),
		"automaxprocs":       ok(def, "flag accepted and ignored", "flag=--automaxprocs"),
		"automaxprocs=false": ok(def),
		"version":            {version: true},
		// component-base logging flags.
		"v=0":                            ok(def),
		"v=5":                            {want: &def, debug: true},
		"-v 4":                           {want: &def, debug: true},
		"v=-1":                           {code: exitBadInput, stderr: []string{"--v", `"-1"`, "whole number"}},
		"vmodule":                        ok(def, "flag accepted and ignored", "flag=--vmodule", "value=registrar*=5"),
		"vmodule json":                   {code: exitBadInput, stderr: []string{"--vmodule", "only supported with --logging-format=text"}},
		"logging-format":                 ok(def),
		"logging-format json":            ok(def, `"msg":"starting csi-registrar register"`),
		"logging-format yaml":            {code: exitBadInput, stderr: []string{"--logging-format", `"yaml"`, "text or json"}},
		"log-flush-frequency":            ok(def, "flag accepted and ignored", "flag=--log-flush-frequency"),
		"log-flush-frequency 0":          {code: exitBadInput, stderr: []string{"--log-flush-frequency", "greater than zero"}},
		"log-text-split-stream=false":    ok(def),
		"log-text-split-stream":          {code: exitBadInput, stderr: []string{"--log-text-split-stream", "LoggingAlphaOptions"}},
		"log-text-info-buffer-size=0":    ok(def),
		"log-text-info-buffer-size=0Ki":  ok(def),
		"log-text-info-buffer-size=1Ki":  {code: exitBadInput, stderr: []string{"--log-text-info-buffer-size", `"1Ki"`, "only 0"}},
		"log-json-split-stream=false":    ok(def),
		"log-json-split-stream=true":     {code: exitBadInput, stderr: []string{"--log-json-split-stream", "LoggingAlphaOptions"}},
		"log-json-info-buffer-size=0":    ok(def),
		"log-json-info-buffer-size=64Mi": {code: exitBadInput, stderr: []string{"--log-json-info-buffer-size", `"64Mi"`, "only 0"}},
	}
	args := map[string][]string{
		"mode empty": {"--mode="}, "mode registration": {"--mode=registration"}, "mode other": {"--mode=node"},
		"mode probe":     {"--mode=kubelet-registration-probe", "--state-file=" + noStateFile},
		"health-port -1": {"--health-port=-1"}, "health-port 0": {"--health-port=0"}, "health-port 9809": {"--health-port=9809"},
		"health-port with http-endpoint":       {"--health-port=9809", "--http-endpoint=:9810"},
		"http-endpoint":                        {"--http-endpoint=:8080"},
		"kubelet-registration-path //":         {"--kubelet-registration-path=/var/lib/kubelet//plugins/csi-hostpath/csi.sock"},
		"kubelet-registration-path trailing /": {"--kubelet-registration-path=" + kp + "/"},
		"kubelet-registration-path /./":        {"--kubelet-registration-path=/var/lib/kubelet/./plugins/csi-hostpath/csi.sock"},
		"csi-address":                          {"--csi-address=unix:///csi/other.sock"},
		"plugin-registration-path":             {"--plugin-registration-path=/var/lib/kubelet/plugins_registry"},
		"timeout":                              {"--timeout=3s"}, "timeout no unit": {"--timeout=3"},
		"connection-timeout": {"--connection-timeout=30s"}, "enable-pprof": {"--enable-pprof"},
		"automaxprocs": {"--automaxprocs"}, "automaxprocs=false": {"--automaxprocs=false"}, "version": {"--version"},
		"v=0": {"--v=0"}, "v=5": {"--v=5"}, "-v 4": {"-v", "4"}, "v=-1": {"--v=-1"},
		"vmodule": {"--vmodule=registrar*=5"}, "vmodule json": {"--vmodule=registrar*=5", "--logging-format=json"},
		"logging-format": {"--logging-format=text"}, "logging-format json": {"--logging-format=json"},
		"logging-format yaml": {"--logging-format=yaml"},
		"log-flush-frequency": {"--log-flush-frequency=10s"}, "log-flush-frequency 0": {"--log-flush-frequency=0s"},
		"log-text-split-stream=false":    {"--log-text-split-stream=false"},
		"log-text-split-stream":          {"--log-text-split-stream"},
		"log-text-info-buffer-size=0":    {"--log-text-info-buffer-size=0"},
		"log-text-info-buffer-size=0Ki":  {"--log-text-info-buffer-size=0Ki"},
		"log-text-info-buffer-size=1Ki":  {"--log-text-info-buffer-size=1Ki"},
		"log-json-split-stream=false":    {"--log-json-split-stream=false"},
		"log-json-split-stream=true":     {"--log-json-split-stream=true"},
		"log-json-info-buffer-size=0":    {"--log-json-info-buffer-size=0"},
		"log-json-info-buffer-size=64Mi": {"--log-json-info-buffer-size=64Mi"},
	}
	// Every upstream flag is covered, and register defines it.
	covered := map[string]bool{}
	for name := range cases {
		if len(args[name]) == 0 {
			t.Fatalf("test bug: case %q has no arguments", name)
		}
		for _, a := range args[name] {
			covered[strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")] = true
		}
	}
	registerFlags := map[string]bool{}
	for _, f := range registerCommand(nil).Flags {
		for _, n := range f.Names() {
			registerFlags[n] = true
		}
	}
	for _, f := range upstreamFlags {
		if !covered[f] {
			t.Errorf("upstream flag --%s has no case", f)
		}
		if !registerFlags[f] {
			t.Errorf("upstream flag --%s is not a flag of register", f)
		}
	}

	for name, c := range cases {
		argv := append([]string{"--csi-address=" + addr, "--kubelet-registration-path=" + kp}, args[name]...)
		for form, argv := range invocations(argv) {
			t.Run(name+"/"+form, func(t *testing.T) {
				clearPrefixedEnv(t)
				var cp capture
				res := runInProcess(t, cp.roles(), argv...)
				if res.code != c.code {
					t.Fatalf("exit code %d, want %d; %s", res.code, c.code, res)
				}
				if c.version != strings.Contains(res.stdout, "csi-registrar "+version) {
					t.Errorf("version printed = %v, want %v; %s", !c.version, c.version, res)
				}
				if c.want == nil {
					if cp.registerCalls != 0 {
						t.Errorf("the registrar started")
					}
				} else {
					if cp.registerCalls != 1 {
						t.Fatalf("want one register call; %s", res)
					}
					got := cp.register[0]
					if d := got.Logger.Enabled(context.Background(), slog.LevelDebug); d != c.debug {
						t.Errorf("debug logging = %v, want %v", d, c.debug)
					}
					got.Logger = nil
					if !reflect.DeepEqual(got, *c.want) {
						t.Errorf("options:\n got %+v\nwant %+v", got, *c.want)
					}
				}
				if c.code != 0 {
					if l := linesWith(res.stderr, append([]string{"error: "}, c.stderr...)...); len(l) != 1 {
						t.Errorf("want one error line with %q; %s", c.stderr, res)
					}
				} else if len(c.stderr) > 0 && len(linesWith(res.stderr, c.stderr...)) != 1 {
					t.Errorf("want one log line with %q; %s", c.stderr, res)
				}
			})
		}
	}
}

// TestEveryFlagHasVariable: every flag of every command that sets something
// (all but --version and --help) can be set by a variable,
// CSI_REGISTRAR_<FLAG> for register and driver, CSI_REGISTRAR_PROBE_<FLAG>
// for probe.
func TestEveryFlagHasVariable(t *testing.T) {
	for _, cmd := range newApp(nil, nil, defaultRoles()).Commands {
		prefix := envPrefix
		if cmd.Name == "probe" {
			prefix = probeEnvPrefix
		}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if name == "version" || name == "help" {
				continue
			}
			want := prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			ef, ok := f.(interface{ GetEnvVars() []string })
			if !ok || !reflect.DeepEqual(ef.GetEnvVars(), []string{want}) {
				t.Errorf("%s --%s: variables %v, want [%s]", cmd.Name, name, ef.GetEnvVars(), want)
			}
		}
	}
}

// TestVariablesOfLoggingFlags: the logging flags' variables are read: each
// one set to a value upstream refuses is refused naming the variable.
func TestVariablesOfLoggingFlags(t *testing.T) {
	const kp = "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock"
	for name, value := range map[string]string{
		"CSI_REGISTRAR_V":                         "-2",
		"CSI_REGISTRAR_LOGGING_FORMAT":            "yaml",
		"CSI_REGISTRAR_VMODULE":                   "x",
		"CSI_REGISTRAR_LOG_FLUSH_FREQUENCY":       "-1s",
		"CSI_REGISTRAR_LOG_TEXT_SPLIT_STREAM":     "true",
		"CSI_REGISTRAR_LOG_TEXT_INFO_BUFFER_SIZE": "1M",
		"CSI_REGISTRAR_LOG_JSON_SPLIT_STREAM":     "true",
		"CSI_REGISTRAR_LOG_JSON_INFO_BUFFER_SIZE": "2Ki",
		"CSI_REGISTRAR_HEALTH_PORT":               "70000",
	} {
		t.Run(name, func(t *testing.T) {
			clearPrefixedEnv(t)
			t.Setenv(name, value)
			var c capture
			res := runInProcess(t, c.roles(), "csi-registrar", "register", kp)
			if res.code != exitBadInput || c.registerCalls != 0 || len(linesWith(res.stderr, "error: ", `"`+value+`"`)) != 1 {
				t.Errorf("want exit 2 naming %q; %s", value, res)
			}
		})
	}
	t.Run("CSI_REGISTRAR_MODE", func(t *testing.T) {
		clearPrefixedEnv(t)
		t.Setenv("CSI_REGISTRAR_MODE", "other")
		var c capture
		res := runInProcess(t, c.roles(), "csi-registrar", "register", kp)
		if res.code != 0 || c.registerCalls != 1 || len(linesWith(res.stderr, "unknown --mode value", "mode=other")) != 1 {
			t.Errorf("want a registration and the mode logged; %s", res)
		}
	})
}
