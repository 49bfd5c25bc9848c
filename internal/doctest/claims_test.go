package doctest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// cobraHelp is a part of the kubectl plugin's `status --help` and `verify --help`, in cobra's format.
const (
	statusHelp = "Flags:\n" +
		"  -h, --help                           help for status\n" +
		"      --proxy-concurrency int          most proxy calls in flight (default 16)\n" +
		"      --proxy-timeout duration         deadline of each proxy call (default 5s)\n" +
		"      --kubelet-state                  read each node's kubelet /metrics\n" +
		"  -o, --output string                  output format: wide, json or yaml (default: one row per driver)\n"
	verifyHelp = "Flags:\n" +
		"      --case stringArray               run only this case\n" +
		"  -f, --filename stringArray           the driver's manifests\n" +
		"      --node-image string              image of the privileged node pod (default \"busybox:1.37\")\n"
)

// TestProseClaimsCaught: each form of a prose default, a default stated in
// a table without a flag column, a claim over a line break, and the kubectl
// plugin's flags and defaults: a wrong claim of each kind fails, the right
// one passes.
func TestProseClaimsCaught(t *testing.T) {
	status, verify := doctest.ParseCobraHelp(statusHelp), doctest.ParseCobraHelp(verifyHelp)
	if f := status["proxy-timeout"]; !f.HasDefault || f.Default != "5s" {
		t.Errorf("ParseCobraHelp: proxy-timeout = %+v, want default 5s", f)
	}
	if f := status["output"]; f.HasDefault {
		t.Errorf("ParseCobraHelp: output = %+v, want no default (\"default:\" is prose)", f)
	}
	if f := verify["node-image"]; f.Default != "busybox:1.37" {
		t.Errorf("ParseCobraHelp: node-image = %+v, want default busybox:1.37", f)
	}
	register := parseHelpOf(t, "   --kubelet-wait value   re-create (default: 2m0s) [$X]\n"+
		"   --connection-timeout value   wait (default: 0s) [$X]\n"+
		"   --registration-retry-max value  cap (default: 5m0s) [$X]\n")
	helps := map[string]map[string]doctest.FlagHelp{"register": register, "status": status, "verify": verify}

	for _, tc := range []struct {
		name, right, wrong string
	}{
		{"(default `X`)", "`--kubelet-wait` (default `2m`) bounds it.", "`--kubelet-wait` (default `3m`) bounds it."},
		{"`--flag=X`, the default", "with `--connection-timeout=0`, the default, it waits.", "with `--connection-timeout=5s`, the default, it waits."},
		{"(X by default)", "`--registration-retry-max` (5 min by default) caps it.", "`--registration-retry-max` (4 min by default) caps it."},
		{"`X` by default", "`kubectl csi-registrar verify` uses `--node-image`, `busybox:1.37` by default.", "`kubectl csi-registrar verify` uses `--node-image`, `busybox:1.36` by default."},
		{"(5s)", "`kubectl csi-registrar status`: `--proxy-timeout` (5s) and `--proxy-concurrency` (16).", "`kubectl csi-registrar status`: `--proxy-timeout` (5s) and `--proxy-concurrency` (8)."},
		{"over a line break", "It waits: `--kubelet-wait` default\n`2m`, then more.", "It waits: `--kubelet-wait` default\n`20m`, then more."},
		{"in a table without a flag column", "| case | what |\n|---|---|\n| slow | `--connection-timeout=0`, the default: waits |\n", "| case | what |\n|---|---|\n| slow | `--connection-timeout=1s`, the default: waits |\n"},
		{"a kubectl flag", "Run `kubectl csi-registrar status --kubelet-state -o wide`.", "Run `kubectl csi-registrar status --kubelet-states`."},
		{"a kubectl flag in a shell block", "```sh illustrative\nkubectl csi-registrar verify -f manifests/ --case 6_rollout\n```\n", "```sh illustrative\nkubectl csi-registrar verify -f manifests/ --cases 6_rollout\n```\n"},
	} {
		check := func(text string) (n int, errs []error) {
			dir := write(t, map[string]string{"p.md": "# Page\n\n" + text + "\n"})
			p := filepath.Join(dir, "p.md")
			fc, err := doctest.FlagClaims(p)
			if err != nil {
				t.Fatal(err)
			}
			kc, err := doctest.KubectlFlagClaims(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range append(fc, kc...) {
				if err := c.Check(helps); err != nil {
					errs = append(errs, err)
				}
			}
			return len(fc) + len(kc), errs
		}
		if n, errs := check(tc.right); n == 0 || len(errs) != 0 {
			t.Errorf("%s: the right claim: %d claims found, errors %v; want at least one, no error", tc.name, n, errs)
		}
		if _, errs := check(tc.wrong); len(errs) == 0 {
			t.Errorf("%s: the wrong claim %q passed", tc.name, tc.wrong)
		} else {
			t.Logf("%s: caught: %v", tc.name, errs[0])
		}
	}
}

// TestMakeVarsCaught: a make variable the build does not know, and a wrong
// default stated for one, fail; the right ones pass.
func TestMakeVarsCaught(t *testing.T) {
	dir := write(t, map[string]string{
		"Makefile":  "STATUS_NODES ?= 5000\ne2e:\n\tbash run.sh $(E2E_ARGS)\n",
		"run.sh":    "k8s=${K8S:-1.37}\n",
		"suite.go":  "package e2e\n\nvar rounds = os.Getenv(\"E2E_ROUNDS\")\n",
		"right.md":  "Run `make e2e K8S=1.34 E2E_ARGS=-test.v`, or `E2E_ROUNDS=3 make e2e`; `STATUS_NODES=5000`, the default, and `K8S` (default `1.37`).\n\n```sh illustrative\nmake e2e E2E_ROUNDS=2 && echo K8S_WRONG=x\n```\n",
		"wrong1.md": "Run `make e2e K8S_VERSION=1.34`.\n",
		"wrong2.md": "```sh illustrative\nmake e2e E2E_ARG=-test.v\n```\n",
		"wrong3.md": "`STATUS_NODES=500`, the default.\n",
		"wrong4.md": "`K8S` (default `1.36`).\n",
		"wrong5.md": "`E2E_ROUNDS=1`, the default.\n",
	})
	p := func(n string) string { return filepath.Join(dir, n) }
	vars, err := doctest.ReadMakeVars([]string{p("Makefile")}, []string{p("run.sh"), p("suite.go")})
	if err != nil {
		t.Fatal(err)
	}
	check := func(file string) (int, []error) {
		claims, err := doctest.MakeVarClaims(p(file))
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		for _, c := range claims {
			if err := c.Check(vars); err != nil {
				errs = append(errs, err)
			}
		}
		return len(claims), errs
	}
	if n, errs := check("right.md"); n != 5 || len(errs) != 0 {
		t.Errorf("right.md: %d claims (want 5: K8S, E2E_ARGS, the two defaults, E2E_ROUNDS in the block; not the variable before make, nor after &&), errors %v", n, errs)
	}
	for file, want := range map[string]string{
		"wrong1.md": "make variable K8S_VERSION: no Makefile or script",
		"wrong2.md": "make variable E2E_ARG: no Makefile or script",
		"wrong3.md": `STATUS_NODES's default as "500", the build's is "5000"`,
		"wrong4.md": `K8S's default as "1.36", the build's is "1.37"`,
		"wrong5.md": `E2E_ROUNDS's default as "1", but no`,
	} {
		_, errs := check(file)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%s: %v, want one error containing %q", file, errs, want)
		} else {
			t.Logf("%s: caught: %v", file, errs[0])
		}
	}
}
