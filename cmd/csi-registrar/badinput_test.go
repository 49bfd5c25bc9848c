package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badInput is a command line that breaks one rule.
type badInput struct {
	name string
	args []string // after the subcommand and its base flags
	want []string // stderr must name the value and the rule
	// noBase: do not add the base flags (the case is about one of them).
	noBase bool
}

// checkBadInput runs each case through run() with the real roles, so that
// rules checked by the registrar and stubdriver libraries apply, and expects
// exit code 2, an error naming the value and the rule, and nothing created
// in the directory the command was pointed at.
func checkBadInput(t *testing.T, sub string, base func(dir string) []string, cases []badInput) {
	t.Helper()
	clearPrefixedEnv(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var args []string
			if !tc.noBase {
				args = base(dir)
			}
			args = append(args, tc.args...)
			forms := map[string][]string{sub: append([]string{"csi-registrar", sub}, args...)}
			if sub == "register" {
				forms[upstreamName] = append([]string{"/" + upstreamName}, args...)
			}
			for form, argv := range forms {
				res := runInProcess(t, defaultRoles(), argv...)
				if res.code != exitBadInput {
					t.Fatalf("%s: want exit code %d; %s", form, exitBadInput, res)
				}
				errLines := linesWith(res.stderr, "error: ")
				if len(errLines) != 1 {
					t.Fatalf("%s: want one error line; %s", form, res)
				}
				for _, w := range tc.want {
					if !strings.Contains(errLines[0], w) {
						t.Errorf("%s: error line does not contain %q: %s", form, w, errLines[0])
					}
				}
				if res.stdout != "" {
					t.Errorf("%s: bad input printed to stdout: %q", form, res.stdout)
				}
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					t.Errorf("%s: bad input created %s", form, filepath.Join(dir, e.Name()))
				}
			}
		})
	}
}

func TestBadRegisterInput(t *testing.T) {
	base := func(dir string) []string {
		return []string{
			"--csi-address=" + filepath.Join(dir, "csi.sock"),
			"--plugin-registration-path=" + dir,
			"--connection-timeout=1s", // the "valid" parts must not hang if a rule is missed
		}
	}
	const kp = "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock"
	long := "/var/lib/kubelet/plugins/" + strings.Repeat("d", 108-len("/var/lib/kubelet/plugins/")-len("/csi.sock")) + "/csi.sock"
	if len(long) != 108 {
		t.Fatalf("test bug: long path is %d bytes", len(long))
	}
	checkBadInput(t, "register", base, []badInput{
		{name: "missing kubelet-registration-path", want: []string{"--kubelet-registration-path", `""`, "is required"}},
		{name: "empty kubelet-registration-path", args: []string{"--kubelet-registration-path="},
			want: []string{"--kubelet-registration-path", `""`, "is required"}},
		{name: "relative kubelet-registration-path", args: []string{"--kubelet-registration-path=plugins/x/csi.sock"},
			want: []string{`"plugins/x/csi.sock"`, "absolute"}},
		{name: "unclean kubelet-registration-path", args: []string{"--kubelet-registration-path=/a/../b"},
			want: []string{`"/a/../b"`, "clean", `"/b"`}},
		{name: "kubelet-registration-path with trailing slash", args: []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/x/"},
			want: []string{`"/var/lib/kubelet/plugins/x/"`, "clean"}},
		{name: "kubelet-registration-path over 107 bytes", args: []string{"--kubelet-registration-path=" + long},
			want: []string{long, "108 bytes", "107"}},
		{name: "health-port with http-endpoint", args: []string{kp, "--health-port=9809", "--http-endpoint=:9810"},
			want: []string{"--health-port", `"9809"`, "cannot be combined with --http-endpoint=:9810"}},
		{name: "health-port too high", args: []string{kp, "--health-port=65536"},
			want: []string{"--health-port", `"65536"`, "between 1 and 65535"}},
		{name: "health-port negative", args: []string{kp, "--health-port=-1"},
			want: []string{"--health-port", `"-1"`, "between 1 and 65535"}},
		{name: "health-port not a number", args: []string{kp, "--health-port=http"},
			want: []string{"http", "health-port"}},
		{name: "bad mode", args: []string{kp, "--mode=probe"},
			want: []string{"--mode", `"probe"`, "registration or kubelet-registration-probe"}},
		{name: "bad logging-format", args: []string{kp, "--logging-format=yaml"},
			want: []string{"--logging-format", `"yaml"`, "text or json"}},
		{name: "negative -v", args: []string{kp, "-v=-1"},
			want: []string{"--v", `"-1"`, "0 or more"}},
		{name: "negative timeout", args: []string{kp, "--timeout=-1s"},
			want: []string{"--timeout", `"-1s"`, "must not be negative"}},
		{name: "negative connection-timeout", args: []string{kp, "--connection-timeout=-5s"},
			want: []string{"--connection-timeout", `"-5s"`, "must not be negative"}},
		{name: "negative kubelet-wait", args: []string{kp, "--kubelet-wait=-1m"},
			want: []string{"--kubelet-wait", `"-1m0s"`, "must not be negative"}},
		{name: "negative registration-retry-max", args: []string{kp, "--registration-retry-max=-1m"},
			want: []string{"--registration-retry-max", `"-1m0s"`, "must not be negative"}},
		{name: "timeout below 100ms", args: []string{kp, "--timeout=1ms"},
			want: []string{"--timeout", `"1ms"`, "at least 100ms", "churn"}},
		{name: "connection-timeout below 1s", args: []string{kp, "--connection-timeout=10ms"},
			want: []string{"--connection-timeout", `"10ms"`, "at least 1s (or 0 for no limit)"}},
		{name: "kubelet-wait below 10s", args: []string{kp, "--kubelet-wait=1ms"},
			want: []string{"--kubelet-wait", `"1ms"`, "at least 10s", "use 10s or more"}},
		{name: "registration-retry-max below 1s", args: []string{kp, "--registration-retry-max=1ms"},
			want: []string{"--registration-retry-max", `"1ms"`, "at least 1s", "use 1s or more"}},
		{name: "http-endpoint without a port", args: []string{kp, "--http-endpoint=9809"},
			want: []string{"--http-endpoint", `"9809"`, "host:port", ":9809"}},
		{name: "http-endpoint port out of range", args: []string{kp, "--http-endpoint=:99999"},
			want: []string{"--http-endpoint", `":99999"`, "0 to 65535"}},
		{name: "http-endpoint bad host", args: []string{kp, "--http-endpoint=a b:9809"},
			want: []string{"--http-endpoint", `"a b:9809"`, "neither an IP address nor a host name"}},
		{name: "timeout not a duration", args: []string{kp, "--timeout=5"},
			want: []string{`"5"`, "timeout"}},
		{name: "tcp csi-address", args: []string{kp, "--csi-address=tcp://127.0.0.1:10000"},
			want: []string{`"tcp://127.0.0.1:10000"`, "only unix sockets"}},
		{name: "empty csi-address", args: []string{kp, "--csi-address="},
			want: []string{"--csi-address", `""`, "must not be empty"}},
		{name: "empty plugin-registration-path", args: []string{kp, "--plugin-registration-path="},
			want: []string{"--plugin-registration-path", `""`, "must not be empty"}},
		{name: "relative csi-address", args: []string{kp, "--csi-address=csi/csi.sock"},
			want: []string{`"csi/csi.sock"`, "absolute"}},
		{name: "driver-name with path", args: []string{kp, "--driver-name=../../evil"},
			want: []string{`"../../evil"`, "only letters, digits, '-' and '.'"}},
		{name: "driver-name with underscore", args: []string{kp, "--driver-name=a_b"},
			want: []string{`"a_b"`, `'_'`}},
		{name: "driver-name 64 characters", args: []string{kp, "--driver-name=" + strings.Repeat("a", 64)},
			want: []string{strings.Repeat("a", 64), "64 characters", "limit is 63"}},
		{name: "unknown flag", args: []string{kp, "--registration-path=/registration"},
			want: []string{"-registration-path", "not defined"}},
		{name: "stray argument", args: []string{kp, "csi-address=/csi/csi.sock"},
			want: []string{`"csi-address=/csi/csi.sock"`, "unexpected argument"}},
	})
}

func TestBadDriverInput(t *testing.T) {
	base := func(dir string) []string {
		return []string{"--endpoint=unix://" + filepath.Join(dir, "csi.sock"), "--node-id=node-1"}
	}
	long := strings.Repeat("n", 193)
	name64 := strings.Repeat("a", 64)
	checkBadInput(t, "driver", base, []badInput{
		{name: "empty node-id", args: []string{"--node-id="},
			want: []string{"node ID", `""`, "must not be empty"}},
		{name: "blank node-id", args: []string{"--node-id=  "},
			want: []string{"node ID", `"  "`, "must not be empty"}},
		{name: "node-id over 192 bytes", args: []string{"--node-id=" + long},
			want: []string{long, "193 bytes", "192"}},
		{name: "negative max-volumes-per-node", args: []string{"--max-volumes-per-node=-1"},
			want: []string{"--max-volumes-per-node", `"-1"`, "must not be negative"}},
		{name: "driver-name with path", args: []string{"--driver-name=../../evil"},
			want: []string{`"../../evil"`, "only letters, digits, '-' and '.'"}},
		{name: "driver-name with underscore", args: []string{"--driver-name=a_b"},
			want: []string{`"a_b"`, `'_'`}},
		{name: "driver-name 64 characters", args: []string{"--driver-name=" + name64},
			want: []string{name64, "64 characters", "limit is 63"}},
		{name: "driver-name starting with a dash", args: []string{"--driver-name=-csi.example.com"},
			want: []string{`"-csi.example.com"`, "start and end with a letter or digit"}},
		{name: "empty driver-name", args: []string{"--driver-name="},
			want: []string{"--driver-name", `""`, "must not be empty"}},
		{name: "empty endpoint", args: []string{"--endpoint="},
			want: []string{"--endpoint", `""`, "must not be empty"}},
		{name: "topology without =", args: []string{"--topology=topology.example.com/zone"},
			want: []string{`"topology.example.com/zone"`, "key=value"}},
		{name: "topology duplicate key", args: []string{"--topology=topology.example.com/zone=a", "--topology=topology.example.com/zone=b"},
			want: []string{`"topology.example.com/zone=b"`, "given twice"}},
		{name: "topology under kubernetes.io", args: []string{"--topology=kubernetes.io/zone=a"},
			want: []string{`"kubernetes.io/zone=a"`, "kubernetes.io/", "NodeRestriction"}},
		{name: "topology under a kubernetes.io subdomain", args: []string{"--topology=example.kubernetes.io/zone=a"},
			want: []string{`"example.kubernetes.io/zone=a"`, "kubernetes.io/"}},
		{name: "topology under k8s.io", args: []string{"--topology=k8s.io/zone=a"},
			want: []string{`"k8s.io/zone=a"`, "k8s.io/", "NodeRestriction"}},
		{name: "topology invalid value", args: []string{"--topology=topology.example.com/zone=zone a!"},
			want: []string{`"topology.example.com/zone=zone a!"`, "value must be"}},
		{name: "topology value too long", args: []string{"--topology=topology.example.com/zone=" + strings.Repeat("z", 64)},
			want: []string{strings.Repeat("z", 64), "value must be at most 63"}},
		{name: "topology invalid key name", args: []string{"--topology=topology.example.com/-zone=a"},
			want: []string{`"topology.example.com/-zone=a"`, "key's name"}},
		{name: "topology invalid key prefix", args: []string{"--topology=Topology_Example/zone=a"},
			want: []string{`"Topology_Example/zone=a"`, "prefix must be a DNS subdomain"}},
		{name: "tcp endpoint", args: []string{"--endpoint=tcp://127.0.0.1:10000"},
			want: []string{`"tcp://127.0.0.1:10000"`, "only unix sockets"}},
		{name: "relative endpoint", args: []string{"--endpoint=unix://csi.sock"},
			want: []string{`"unix://csi.sock"`, "absolute"}},
		{name: "endpoint over 107 bytes", args: []string{"--endpoint=/" + strings.Repeat("e", 107)},
			want: []string{strings.Repeat("e", 107), "108 bytes", "107"}},
		{name: "negative -v", args: []string{"-v=-3"},
			want: []string{"--v", `"-3"`, "0 or more"}},
		{name: "bad logging-format", args: []string{"--logging-format=xml"},
			want: []string{"--logging-format", `"xml"`, "text or json"}},
		{name: "relative kubelet-pods-dir", args: []string{"--state-dir=/var/lib/stub", "--kubelet-pods-dir=pods"},
			want: []string{"--kubelet-pods-dir", `"pods"`, "absolute"}},
		{name: "register with kubelet-wait below 10s", args: []string{"--register", "--kubelet-registration-path=/k/csi.sock", "--kubelet-wait=1ms"},
			want: []string{"--kubelet-wait", `"1ms"`, "at least 10s"}},
		{name: "register with a malformed http-endpoint", args: []string{"--register", "--kubelet-registration-path=/k/csi.sock", "--http-endpoint=localhost"},
			want: []string{"--http-endpoint", `"localhost"`, "host:port"}},
		{name: "unknown flag", args: []string{"--nodeid=node-1"},
			want: []string{"-nodeid", "not defined"}},
		{name: "stray argument", args: []string{"node-1"},
			want: []string{`"node-1"`, "unexpected argument"}},
	})
}

func TestBadProbeInput(t *testing.T) {
	base := func(dir string) []string { return []string{"--timeout=1s"} }
	checkBadInput(t, "probe", base, []badInput{
		{name: "tcp csi-address", args: []string{"--csi-address=tcp://127.0.0.1:10000"},
			want: []string{`"tcp://127.0.0.1:10000"`, "only unix sockets"}},
		{name: "empty csi-address", args: []string{"--csi-address="},
			want: []string{"--csi-address", `""`, "must not be empty"}},
		{name: "unknown flag", args: []string{"--endpoint=/csi/csi.sock"},
			want: []string{"-endpoint", "not defined"}},
	})
}

func TestBadCommandLine(t *testing.T) {
	clearPrefixedEnv(t)
	for _, argv := range [][]string{
		{"csi-registrar", "--bogus"},
		{"csi-registrar", "regsiter"},
		{"csi-registrar", "version", "extra"},
	} {
		res := runInProcess(t, defaultRoles(), argv...)
		if res.code != exitBadInput || len(linesWith(res.stderr, "error: ")) != 1 {
			t.Errorf("%q: want exit code 2 and one error line; %s", argv, res)
		}
	}
}
