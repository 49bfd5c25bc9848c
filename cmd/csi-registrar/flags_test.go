package main

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// defaultRegisterOptions are the options `register` passes on when only
// --csi-address and --kubelet-registration-path are given.
func defaultRegisterOptions(csiAddress, kubeletPath string) registrar.Options {
	return registrar.Options{
		CSIAddress:              csiAddress,
		KubeletRegistrationPath: kubeletPath,
		PluginRegistrationPath:  "/registration",
		Timeout:                 time.Second,
		KubeletWait:             registrar.DefaultKubeletWait,
		RegistrationRetryMax:    registrar.DefaultRegistrationRetryMax,
		StateFile:               registrar.DefaultStateFile,
		Version:                 version,
	}
}

// invocations are the two ways to start the register role: the subcommand,
// and the upstream binary name (the entrypoint of the upstream image is
// /csi-node-driver-registrar, so manifests pass only flags).
func invocations(args []string) map[string][]string {
	return map[string][]string{
		"csi-registrar register":     append([]string{"csi-registrar", "register"}, args...),
		"/csi-node-driver-registrar": append([]string{"/" + upstreamName}, args...),
	}
}

// manifestArgs reads a testdata/*.args file: one argument per line, '#'
// comments, and "env NAME=value" lines that give the container's environment.
// $(NAME) references are expanded as the kubelet expands container args.
func manifestArgs(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	var args []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "", strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "env "):
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "env "), "=")
			if !ok {
				t.Fatalf("%s: bad env line %q", file, line)
			}
			env[k] = v
		default:
			args = append(args, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		args[i] = driverspec.Expand(a, env) // $(NAME) as the kubelet expands it
	}
	return args
}

// TestUpstreamManifests runs the args: lists of node-driver-registrar
// containers from published manifests (testdata/upstream-*.args) and checks
// the options they map to.
func TestUpstreamManifests(t *testing.T) {
	clearPrefixedEnv(t)
	const (
		placeholder = "<drivername.example.com>"
		realName    = "hostpath.csi.k8s.io"
	)
	cases := []struct {
		file  string
		subst bool // replace the README's placeholder by a real driver name
		want  registrar.Options
		debug bool // the manifest's verbosity enables debug logs
	}{
		{file: "upstream-000-ceph-csi-rbd.args", debug: true,
			want: defaultRegisterOptions("/csi/csi.sock", "/var/lib/kubelet/plugins/rbd.csi.ceph.com/csi.sock")},
		{file: "upstream-001-csi-driver-nfs.args",
			want: defaultRegisterOptions("/csi/csi.sock", "/var/lib/kubelet/plugins/csi-nfsplugin/csi.sock")},
		// Verbatim: the placeholder makes a syntactically valid absolute path,
		// so it is accepted (the kubelet would then fail to dial it).
		{file: "upstream-004-readme-example.args",
			want: defaultRegisterOptions("/csi/csi.sock", "/var/lib/kubelet/plugins/"+placeholder+"/csi.sock")},
		// As the README tells the user to: with a real driver name.
		{file: "upstream-004-readme-example.args", subst: true,
			want: defaultRegisterOptions("/csi/csi.sock", "/var/lib/kubelet/plugins/"+realName+"/csi.sock")},
	}
	for _, tc := range cases {
		args := manifestArgs(t, filepath.Join("testdata", tc.file))
		if len(args) == 0 {
			t.Fatalf("%s has no arguments", tc.file)
		}
		name := tc.file
		if tc.subst {
			name += "/substituted"
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], placeholder, realName)
			}
		}
		for form, argv := range invocations(args) {
			t.Run(name+"/"+form, func(t *testing.T) {
				var c capture
				res := runInProcess(t, c.roles(), argv...)
				if res.code != 0 || c.registerCalls != 1 {
					t.Fatalf("want exit 0 and one register call, got %d calls; %s", c.registerCalls, res)
				}
				got := c.register[0]
				if got.Logger == nil {
					t.Fatal("no logger passed to the registrar")
				}
				if d := got.Logger.Enabled(context.Background(), slog.LevelDebug); d != tc.debug {
					t.Errorf("debug logging enabled = %v, want %v", d, tc.debug)
				}
				got.Logger = nil
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("options:\n got %+v\nwant %+v", got, tc.want)
				}
			})
		}
	}
}

// TestUpstreamFlagForms checks flag spellings found in upstream manifests and
// in the upstream flag set, in both invocation forms.
func TestUpstreamFlagForms(t *testing.T) {
	clearPrefixedEnv(t)
	const (
		addr = "/csi/csi.sock"
		kp   = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock"
	)
	base := []string{"--csi-address=" + addr, "--kubelet-registration-path=" + kp}
	def := defaultRegisterOptions(addr, kp)
	with := func(f func(*registrar.Options)) registrar.Options {
		o := def
		f(&o)
		return o
	}
	cases := []struct {
		name    string
		args    []string // added to base
		want    registrar.Options
		debug   bool
		json    bool
		ignored string // the flag is logged as accepted and ignored
	}{
		{name: "health-port", args: []string{"--health-port=9809"}, want: with(func(o *registrar.Options) { o.HTTPEndpoint = ":9809" })},
		{name: "health-port separate value", args: []string{"--health-port", "9809"}, want: with(func(o *registrar.Options) { o.HTTPEndpoint = ":9809" })},
		{name: "health-port 0 disables", args: []string{"--health-port=0"}, want: def},
		{name: "http-endpoint", args: []string{"--http-endpoint=:9809"}, want: with(func(o *registrar.Options) { o.HTTPEndpoint = ":9809" })},
		{name: "http-endpoint with host", args: []string{"--http-endpoint=127.0.0.1:9809"}, want: with(func(o *registrar.Options) { o.HTTPEndpoint = "127.0.0.1:9809" })},
		{name: "-v=5", args: []string{"-v=5"}, want: def, debug: true},
		{name: "--v=5", args: []string{"--v=5"}, want: def, debug: true},
		{name: "--v 5", args: []string{"--v", "5"}, want: def, debug: true},
		{name: "-v 4", args: []string{"-v", "4"}, want: def, debug: true},
		{name: "--v=2", args: []string{"--v=2"}, want: def},
		{name: "--v=0", args: []string{"--v=0"}, want: def},
		{name: "timeout", args: []string{"--timeout=5s"}, want: with(func(o *registrar.Options) { o.Timeout = 5 * time.Second })},
		{name: "connection-timeout", args: []string{"--connection-timeout=15s"}, want: with(func(o *registrar.Options) { o.ConnectionTimeout = 15 * time.Second })},
		{name: "automaxprocs", args: []string{"--automaxprocs"}, want: def, ignored: "--automaxprocs"},
		{name: "logging-format json", args: []string{"--logging-format=json"}, want: def, json: true},
		{name: "logging-format text", args: []string{"--logging-format=text"}, want: def},
		{name: "log-flush-frequency", args: []string{"--log-flush-frequency=5s"}, want: def, ignored: "--log-flush-frequency"},
		{name: "vmodule", args: []string{"--vmodule=x=2"}, want: def, ignored: "--vmodule"},
		{name: "enable-pprof", args: []string{"--http-endpoint=:9809", "--enable-pprof"},
			want: with(func(o *registrar.Options) { o.HTTPEndpoint, o.EnablePprof = ":9809", true })},
		{name: "logtostderr", args: []string{"--logtostderr"}, want: def, ignored: "--logtostderr"},
		{name: "logtostderr=false", args: []string{"--logtostderr=false"}, want: def, ignored: "--logtostderr"},
		{name: "alsologtostderr", args: []string{"--alsologtostderr"}, want: def, ignored: "--alsologtostderr"},
		{name: "log_dir", args: []string{"--log_dir=/tmp"}, want: def, ignored: "--log_dir"},
		{name: "mode registration", args: []string{"--mode=registration"}, want: def},
		{name: "plugin-registration-path", args: []string{"--plugin-registration-path=/var/lib/kubelet/plugins_registry"},
			want: with(func(o *registrar.Options) { o.PluginRegistrationPath = "/var/lib/kubelet/plugins_registry" })},
		{name: "csi-address unix URL", args: []string{"--csi-address=unix:///csi/csi.sock"},
			want: with(func(o *registrar.Options) { o.CSIAddress = "unix:///csi/csi.sock" })},
		{name: "everything of csi-driver-host-path", args: []string{"--v=5", "--health-port=9809", "--timeout=2s"},
			want: with(func(o *registrar.Options) { o.HTTPEndpoint, o.Timeout = ":9809", 2*time.Second }), debug: true},
	}
	for _, tc := range cases {
		for form, argv := range invocations(append(append([]string{}, base...), tc.args...)) {
			t.Run(tc.name+"/"+form, func(t *testing.T) {
				var c capture
				res := runInProcess(t, c.roles(), argv...)
				if res.code != 0 || c.registerCalls != 1 {
					t.Fatalf("want exit 0 and one register call, got %d calls; %s", c.registerCalls, res)
				}
				if res.stdout != "" {
					t.Errorf("stdout should be empty (logs go to stderr), got %q", res.stdout)
				}
				got := c.register[0]
				if d := got.Logger.Enabled(context.Background(), slog.LevelDebug); d != tc.debug {
					t.Errorf("debug logging enabled = %v, want %v", d, tc.debug)
				}
				got.Logger = nil
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("options:\n got %+v\nwant %+v", got, tc.want)
				}
				start := linesWith(res.stderr, "starting csi-registrar register")
				if len(start) != 1 {
					t.Fatalf("want one start line on stderr, got %q", res.stderr)
				}
				if isJSON := strings.HasPrefix(start[0], "{"); isJSON != tc.json {
					t.Errorf("JSON log line = %v, want %v: %q", isJSON, tc.json, start[0])
				}
				if tc.ignored != "" && len(linesWith(res.stderr, "flag accepted and ignored", tc.ignored)) != 1 {
					t.Errorf("want one line saying %s is ignored, stderr:\n%s", tc.ignored, res.stderr)
				}
			})
		}
	}
}

// noStateFile is a state file no registrar writes: its directory does not exist.
const noStateFile = "/nonexistent/csi-registrar-test.state"

// TestRegistrationProbeMode: the upstream exec liveness probe
// `/csi-node-driver-registrar --kubelet-registration-path=... --mode=kubelet-registration-probe`
// starts no registrar; without a registrar's state file it fails (exit 1)
// and says so. exec_test.go's TestExecRegistrationProbe runs it against
// real registrars.
func TestRegistrationProbeMode(t *testing.T) {
	clearPrefixedEnv(t)
	t.Setenv("CSI_REGISTRAR_STATE_FILE", noStateFile)
	args := []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/csi-hostpath/csi.sock", "--mode=kubelet-registration-probe"}
	for form, argv := range invocations(args) {
		t.Run(form, func(t *testing.T) {
			var c capture
			res := runInProcess(t, c.roles(), argv...)
			if res.code != exitError || !strings.Contains(res.stderr, "error: no registrar is running in this container: no state file "+noStateFile) {
				t.Fatalf("want exit 1 saying no registrar runs; %s", res)
			}
			if c.registerCalls != 0 {
				t.Errorf("the probe mode started a registrar")
			}
		})
	}
	// The same through the real roles: nothing may be started (the path
	// /registration does not exist here, a registrar would fail or hang).
	res := runInProcess(t, defaultRoles(), append([]string{"/" + upstreamName}, args...)...)
	if res.code != exitError {
		t.Fatalf("with the real roles: want exit 1; %s", res)
	}
	// A state file that is not an absolute path is bad input.
	res = runInProcess(t, defaultRoles(), append([]string{"/" + upstreamName, "--state-file=csi-registrar.state"}, args...)...)
	if res.code != exitBadInput || !strings.Contains(res.stderr, `invalid --state-file "csi-registrar.state": must be an absolute, clean path`) {
		t.Fatalf("relative --state-file: want exit 2 naming the flag and the rule; %s", res)
	}
}

// TestVerbosityIsNotVersion: -v is the Kubernetes verbosity flag; --version
// and the version subcommand print the version.
func TestVerbosityIsNotVersion(t *testing.T) {
	clearPrefixedEnv(t)
	const kp = "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock"
	for _, v := range []string{"-v=5", "-v=4", "--v=9"} {
		for form, argv := range invocations([]string{v, kp}) {
			t.Run(v+"/"+form, func(t *testing.T) {
				var c capture
				res := runInProcess(t, c.roles(), argv...)
				if res.code != 0 || c.registerCalls != 1 {
					t.Fatalf("want exit 0 and one register call; %s", res)
				}
				if strings.Contains(res.stdout, version) || strings.Contains(res.stdout, "csi-registrar") {
					t.Errorf("%s printed a version: %q", v, res.stdout)
				}
				if !c.register[0].Logger.Enabled(context.Background(), slog.LevelDebug) {
					t.Errorf("%s did not enable debug logging", v)
				}
			})
		}
	}
	t.Run("no -v", func(t *testing.T) {
		var c capture
		res := runInProcess(t, c.roles(), "csi-registrar", "register", kp)
		if res.code != 0 || c.registerCalls != 1 {
			t.Fatalf("want exit 0 and one register call; %s", res)
		}
		l := c.register[0].Logger
		if l.Enabled(context.Background(), slog.LevelDebug) || !l.Enabled(context.Background(), slog.LevelInfo) {
			t.Errorf("default verbosity should log Info and not Debug")
		}
	})
	want := "csi-registrar " + version + "\n"
	for _, argv := range [][]string{
		{"csi-registrar", "--version"},
		{"csi-registrar", "version"},
		{"csi-registrar", "register", "--version"},
		{"csi-registrar", "register", "--version", "-v=5"},
		{"csi-registrar", "driver", "--version"},
		{"/" + upstreamName, "--version"},
		{"/usr/local/bin/" + upstreamName, "--version", kp},
	} {
		t.Run(strings.Join(argv, " "), func(t *testing.T) {
			var c capture
			res := runInProcess(t, c.roles(), argv...)
			if res.code != 0 || res.stdout != want {
				t.Fatalf("want exit 0 and stdout %q; %s", want, res)
			}
			if c.registerCalls+c.driverCalls != 0 {
				t.Errorf("--version started a role")
			}
		})
	}
}

// CSI_REGISTRAR_<FLAG> sets a flag, a flag given on the command line wins, and
// unprefixed names change nothing: one test per behaviour.

// TestEnvRegisterFlags: CSI_REGISTRAR_<FLAG> sets each register flag, in every
// invocation form; a flag on the command line wins.
func TestEnvRegisterFlags(t *testing.T) {
	clearPrefixedEnv(t)
	for k, v := range map[string]string{
		"CSI_REGISTRAR_CSI_ADDRESS":               "/env/csi.sock",
		"CSI_REGISTRAR_KUBELET_REGISTRATION_PATH": "/var/lib/kubelet/plugins/env/csi.sock",
		"CSI_REGISTRAR_PLUGIN_REGISTRATION_PATH":  "/env-registry",
		"CSI_REGISTRAR_DRIVER_NAME":               "env.csi.example.com",
		"CSI_REGISTRAR_TIMEOUT":                   "7s",
		"CSI_REGISTRAR_CONNECTION_TIMEOUT":        "9s",
		"CSI_REGISTRAR_KUBELET_WAIT":              "3m",
		"CSI_REGISTRAR_REGISTRATION_RETRY_MAX":    "4m",
		"CSI_REGISTRAR_HEALTH_PORT":               "9810",
		"CSI_REGISTRAR_ENABLE_PPROF":              "true",
		"CSI_REGISTRAR_STATE_FILE":                "/env/csi-registrar.state",
	} {
		t.Setenv(k, v)
	}
	want := registrar.Options{
		CSIAddress:              "/env/csi.sock",
		KubeletRegistrationPath: "/var/lib/kubelet/plugins/env/csi.sock",
		PluginRegistrationPath:  "/env-registry",
		DriverName:              "env.csi.example.com",
		Timeout:                 7 * time.Second,
		ConnectionTimeout:       9 * time.Second,
		KubeletWait:             3 * time.Minute,
		RegistrationRetryMax:    4 * time.Minute,
		HTTPEndpoint:            ":9810",
		EnablePprof:             true,
		StateFile:               "/env/csi-registrar.state",
		Version:                 version,
	}
	for form, argv := range invocations(nil) {
		var c capture
		res := runInProcess(t, c.roles(), argv...)
		if res.code != 0 || c.registerCalls != 1 {
			t.Fatalf("%s: want exit 0 and one register call; %s", form, res)
		}
		got := c.register[0]
		got.Logger = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: options:\n got %+v\nwant %+v", form, got, want)
		}
	}
	// The command line wins over the environment.
	var c capture
	res := runInProcess(t, c.roles(), "csi-registrar", "register", "--timeout=2s", "--csi-address=/flag/csi.sock")
	if res.code != 0 || c.registerCalls != 1 {
		t.Fatalf("want exit 0 and one register call; %s", res)
	}
	if got := c.register[0]; got.Timeout != 2*time.Second || got.CSIAddress != "/flag/csi.sock" {
		t.Errorf("flags did not override the environment: %+v", got)
	}
}

// TestEnvMode: CSI_REGISTRAR_MODE=kubelet-registration-probe makes the
// upstream name exit 0 without a registrar.
func TestEnvMode(t *testing.T) {
	clearPrefixedEnv(t)
	t.Setenv("CSI_REGISTRAR_MODE", "kubelet-registration-probe")
	t.Setenv("CSI_REGISTRAR_STATE_FILE", noStateFile)
	var c capture
	res := runInProcess(t, c.roles(), "/"+upstreamName)
	if res.code != exitError || c.registerCalls != 0 || !strings.Contains(res.stderr, noStateFile) {
		t.Fatalf("CSI_REGISTRAR_MODE=kubelet-registration-probe: want the probe (exit 1, no state file at CSI_REGISTRAR_STATE_FILE) and no registrar; %s", res)
	}
}

// TestEnvBadValue: a variable that does not parse is bad input (exit 2) naming
// the variable and its value.
func TestEnvBadValue(t *testing.T) {
	clearPrefixedEnv(t)
	t.Setenv("CSI_REGISTRAR_TIMEOUT", "soon")
	var c capture
	res := runInProcess(t, c.roles(), "csi-registrar", "register", "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock")
	if res.code != exitBadInput || c.registerCalls != 0 || !containsAll(res.stderr, "soon", "CSI_REGISTRAR_TIMEOUT") {
		t.Fatalf("want exit 2 naming the variable and its value; %s", res)
	}
}

// TestEnvDriverFlags: CSI_REGISTRAR_<FLAG> sets each driver flag.
func TestEnvDriverFlags(t *testing.T) {
	clearPrefixedEnv(t)
	for k, v := range map[string]string{
		"CSI_REGISTRAR_ENDPOINT":             "unix:///env/csi.sock",
		"CSI_REGISTRAR_DRIVER_NAME":          "env.csi.example.com",
		"CSI_REGISTRAR_NODE_ID":              "env-node",
		"CSI_REGISTRAR_MAX_VOLUMES_PER_NODE": "12",
		"CSI_REGISTRAR_TOPOLOGY":             "topology.example.com/zone=z1,topology.example.com/rack=r2",
	} {
		t.Setenv(k, v)
	}
	var c capture
	res := runInProcess(t, c.roles(), "csi-registrar", "driver")
	if res.code != 0 || c.driverCalls != 1 {
		t.Fatalf("want exit 0 and one driver call; %s", res)
	}
	got := c.driver[0]
	wantTopo := map[string]string{"topology.example.com/zone": "z1", "topology.example.com/rack": "r2"}
	if got.Endpoint != "unix:///env/csi.sock" || got.Name != "env.csi.example.com" || got.NodeID != "env-node" ||
		got.MaxVolumesPerNode != 12 || !reflect.DeepEqual(got.Topology, wantTopo) {
		t.Errorf("driver options from the environment: %+v", got)
	}
}

// TestEnvProbe: probe reads CSI_REGISTRAR_PROBE_*, not the register
// container's CSI_REGISTRAR_*.
func TestEnvProbe(t *testing.T) {
	clearPrefixedEnv(t)
	// probe has a prefix of its own: the register container's
	// CSI_REGISTRAR_* (e.g. a 1s timeout) does not change it.
	t.Setenv("CSI_REGISTRAR_PROBE_CSI_ADDRESS", "tcp://env-probe:1")
	t.Setenv("CSI_REGISTRAR_CSI_ADDRESS", "tcp://register-address:1")
	res := runInProcess(t, defaultRoles(), "csi-registrar", "probe")
	if res.code != exitBadInput || !strings.Contains(res.stderr, "tcp://env-probe:1") {
		t.Fatalf("probe did not read CSI_REGISTRAR_PROBE_CSI_ADDRESS; %s", res)
	}
	t.Setenv("CSI_REGISTRAR_PROBE_TIMEOUT", "5")
	res = runInProcess(t, defaultRoles(), "csi-registrar", "probe")
	if res.code != exitBadInput || !containsAll(res.stderr, "CSI_REGISTRAR_PROBE_TIMEOUT", "needs a unit") {
		t.Fatalf("probe did not read CSI_REGISTRAR_PROBE_TIMEOUT; %s", res)
	}
}

// TestEnvUnprefixed: unprefixed names (upstream's, the flags' own) change
// nothing.
func TestEnvUnprefixed(t *testing.T) {
	clearPrefixedEnv(t)
	for k, v := range map[string]string{
		"VERSION":                   "1",
		"TIMEOUT":                   "5s",
		"CSI_ADDRESS":               "/x",
		"KUBELET_REGISTRATION_PATH": "/y",
		"PLUGIN_REGISTRATION_PATH":  "/z",
		"HTTP_ENDPOINT":             ":1",
		"HEALTH_PORT":               "1",
		"MODE":                      "kubelet-registration-probe",
		"STATE_FILE":                "/unprefixed.state",
		"DRIVER_NAME":               "unprefixed.example.com",
		"CONNECTION_TIMEOUT":        "1s",
		"V":                         "5",
		"LOGGING_FORMAT":            "json",
		"ENDPOINT":                  "unix:///unprefixed.sock",
		"NODE_ID":                   "unprefixed-node",
		"MAX_VOLUMES_PER_NODE":      "3",
		"TOPOLOGY":                  "a.example.com/b=c",
		"ADDRESS":                   "/address.sock",
		"DRIVER_REG_SOCK_PATH":      "/var/lib/kubelet/plugins/other/csi.sock",
	} {
		t.Setenv(k, v)
	}
	const kp = "/var/lib/kubelet/plugins/x/csi.sock"
	for form, argv := range invocations([]string{"--kubelet-registration-path=" + kp}) {
		var c capture
		res := runInProcess(t, c.roles(), argv...)
		if res.code != 0 || c.registerCalls != 1 || res.stdout != "" {
			t.Fatalf("%s: want exit 0, one register call and no version printed; %s", form, res)
		}
		got := c.register[0]
		if got.Logger.Enabled(context.Background(), slog.LevelDebug) || strings.HasPrefix(res.stderr, "{") {
			t.Errorf("%s: V or LOGGING_FORMAT changed logging", form)
		}
		got.Logger = nil
		if want := defaultRegisterOptions(registrar.DefaultCSIAddress, kp); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: options:\n got %+v\nwant %+v", form, got, want)
		}
	}
	// KUBELET_REGISTRATION_PATH does not stand in for the required flag.
	res := runInProcess(t, defaultRoles(), "csi-registrar", "register")
	if res.code != exitBadInput || !containsAll(res.stderr, "--kubelet-registration-path", "is required") {
		t.Errorf("want exit 2 for the missing --kubelet-registration-path; %s", res)
	}
	var c capture
	res = runInProcess(t, c.roles(), "csi-registrar", "driver", "--node-id=n1")
	if res.code != 0 || c.driverCalls != 1 {
		t.Fatalf("driver: want exit 0; %s", res)
	}
	if got := c.driver[0]; got.Endpoint != "unix:///csi/csi.sock" || got.Name != stubdriver.DefaultName ||
		got.NodeID != "n1" || got.MaxVolumesPerNode != 0 || len(got.Topology) != 0 {
		t.Errorf("driver: unprefixed variables changed options: %+v", got)
	}
}

// TestEnvNodeName: KUBE_NODE_NAME is the driver's default node ID.
func TestEnvNodeName(t *testing.T) {
	clearPrefixedEnv(t)
	t.Setenv("KUBE_NODE_NAME", "node-from-downward-api")
	var c capture
	res := runInProcess(t, c.roles(), "csi-registrar", "driver")
	if res.code != 0 || c.driverCalls != 1 || c.driver[0].NodeID != "node-from-downward-api" {
		t.Fatalf("want node ID from KUBE_NODE_NAME; %s", res)
	}
}

// TestEnvHelp: every command's --help lists the variables it reads, all with
// the prefix.
func TestEnvHelp(t *testing.T) {
	clearPrefixedEnv(t)
	app := newApp(nil, nil, defaultRoles())
	for _, cmd := range app.Commands {
		if cmd.Name == "version" {
			continue
		}
		res := runInProcess(t, defaultRoles(), "csi-registrar", cmd.Name, "--help")
		if res.code != 0 {
			t.Fatalf("%s --help: %s", cmd.Name, res)
		}
		listed := 0
		for _, f := range cmd.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if vf, visible := f.(cli.VisibleFlag); !ok || visible && !vf.IsVisible() {
				continue
			}
			for _, ev := range df.GetEnvVars() {
				if !strings.HasPrefix(ev, envPrefix) {
					t.Errorf("%s --%s reads %s, which lacks the %s prefix", cmd.Name, f.Names()[0], ev, envPrefix)
				}
				if want := "$" + ev; !strings.Contains(res.stdout, want) {
					t.Errorf("%s --help does not list %s", cmd.Name, want)
				}
				listed++
			}
		}
		if listed == 0 {
			t.Errorf("%s has no flag read from the environment", cmd.Name)
		}
	}
	// The ones users look for.
	res := runInProcess(t, defaultRoles(), "/"+upstreamName, "--help")
	for _, name := range []string{"CSI_REGISTRAR_CSI_ADDRESS", "CSI_REGISTRAR_KUBELET_REGISTRATION_PATH",
		"CSI_REGISTRAR_PLUGIN_REGISTRATION_PATH", "CSI_REGISTRAR_HTTP_ENDPOINT", "CSI_REGISTRAR_TIMEOUT"} {
		if !strings.Contains(res.stdout, "$"+name) {
			t.Errorf("%s --help does not list $%s", upstreamName, name)
		}
	}
}

// TestProbeNotReadyInProcess: a failing probe is returned by run() as exit
// code 1 with one error line, like every other error (urfave/cli must not
// print it itself or call os.Exit).
func TestProbeNotReadyInProcess(t *testing.T) {
	clearPrefixedEnv(t)
	missing := filepath.Join(t.TempDir(), "missing.sock")
	res := runInProcess(t, defaultRoles(), "csi-registrar", "probe", "--csi-address="+missing, "--timeout=100ms")
	if res.code != exitError {
		t.Fatalf("want exit code %d; %s", exitError, res)
	}
	if lines := linesWith(res.stderr, "error: not ready", missing); len(lines) != 1 || strings.Count(res.stderr, "\n") != 1 {
		t.Errorf("want exactly one error line naming the socket; %s", res)
	}
}
