package storagee2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/e2ebinary"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

const reference = "../../" + ReferenceDefinition

// fakeE2E writes an executable that answers --version as an e2e test
// binary of version does (the real one is 118 MB and built in minutes).
func fakeE2E(t *testing.T, version string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "e2e.test")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewRefuses: every input that cannot work is refused by New, before
// any cluster is asked, as a *csiplugin.ValidationError naming the input, its value, the
// rule and a fix.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	aFile := writeFile(t, "file", "x")
	failing := writeFile(t, "failing", "#!/bin/sh\necho 'flag provided but not defined: -version' >&2\nexit 2\n")
	if err := os.Chmod(failing, 0o755); err != nil {
		t.Fatal(err)
	}
	good := fakeE2E(t, "v1.37.2")
	run := func(o Options) Options {
		if o.Definition == "" {
			o.Definition = reference
		}
		if o.OutDir == "" {
			o.OutDir = dir
		}
		return o
	}
	for _, tc := range []struct {
		name string
		o    Options
		opt  Option
		want string
	}{
		{"no definition", Options{OutDir: dir}, OptionDefinition, "must be given"},
		{"definition absent", Options{Definition: filepath.Join(dir, "absent.yaml"), OutDir: dir}, OptionDefinition, "cannot be read"},
		{"definition without name", run(Options{Definition: writeFile(t, "d.yaml", "DriverInfo: {}\nInlineVolumes: [{}]\n")}), OptionDefinition, "DriverInfo.Name is empty"},
		{"binary fails", run(Options{E2EBinary: failing}), OptionE2EBinary, "flag provided but not defined"},
		{"binary not executable", run(Options{E2EBinary: aFile}), OptionE2EBinary, "does not run"},
		{"binary absent", run(Options{E2EBinary: filepath.Join(dir, "nope")}), OptionE2EBinary, "does not run"},
		{"version without build-only", run(Options{KubernetesVersion: "v1.37.2"}), OptionKubernetesVersion, "applies to a build only"},
		{"version not a release", Options{BuildOnly: true, KubernetesVersion: "1.37"}, OptionKubernetesVersion, "is not a Kubernetes release"},
		{"build-only with a binary", Options{BuildOnly: true, E2EBinary: good}, OptionE2EBinary, "gives the binary"},
		{"cache dir a file", run(Options{CacheDir: aFile}), OptionCacheDir, "is a file"},
		{"focus", run(Options{Focus: "should ["}), OptionFocus, "not a regular expression"},
		{"skip", run(Options{Skip: []string{`ok`, `(`}}), OptionSkip, "not a regular expression"},
		{"repo list absent", run(Options{RepoList: filepath.Join(dir, "absent")}), OptionRepoList, "cannot be read"},
		{"repo list a list", run(Options{RepoList: writeFile(t, "l.yaml", "- a\n")}), OptionRepoList, "not a YAML mapping"},
		{"repo list empty", run(Options{RepoList: writeFile(t, "e.yaml", "# nothing\n")}), OptionRepoList, "maps no registry"},
		{"expected empty", run(Options{Expected: writeFile(t, "x", "# none\n")}), OptionExpected, "names no spec"},
		{"out a file", run(Options{OutDir: aFile}), OptionOutDir, "is a file"},
		{"timeout", run(Options{Timeout: 10 * time.Second}), OptionTimeout, "at least 1m"},
		{"register timeout", run(Options{RegisterTimeout: -time.Second}), OptionRegisterTimeout, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.o)
			var oe *csiplugin.ValidationError
			if !errors.As(err, &oe) || oe.What != string(tc.opt) || oe.Fix == "" || !strings.Contains(oe.Rule, tc.want) {
				t.Fatalf("New: %#v; want a *csiplugin.ValidationError of %s with a fix, its rule containing %q", err, tc.opt, tc.want)
			}
			if oe.Rule != "must be given" && oe.Value == "" {
				t.Errorf("%v: the value is not named", err)
			}
		})
	}
	if _, err := New(context.Background(), Options{Definition: reference}); err == nil || !strings.Contains(err.Error(), "Options.OutDir") {
		t.Errorf("no output directory: %v", err)
	}
}

// TestNewAccepts: what New keeps of valid options.
func TestNewAccepts(t *testing.T) {
	dir := t.TempDir()
	repos := writeFile(t, "repos.yaml", "promoterE2eRegistry: registry.example.com/e2e\nnoSuchRegistry: x\n")
	s, err := New(context.Background(), Options{Definition: reference, E2EBinary: fakeE2E(t, "v1.37.2"), OutDir: filepath.Join(dir, "new"),
		RepoList: repos, Focus: "read-only", Skip: []string{"two pods"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.binaryVersion != "v1.37.2" || s.Definition().DriverInfo.Name != "stub.csi.example.com" || !filepath.IsAbs(s.o.Definition) {
		t.Errorf("suite %+v", s)
	}
	if s.o.Timeout != DefaultTimeout || s.o.RegisterTimeout != DefaultRegisterTimeout {
		t.Errorf("defaults not set: %v %v", s.o.Timeout, s.o.RegisterTimeout)
	}
	// A build needs no definition and no output directory.
	b, err := New(context.Background(), Options{BuildOnly: true, KubernetesVersion: "v1.38.0-alpha.1"})
	if err != nil || b.release == nil || b.release.String() != "v1.38.0-alpha.1" {
		t.Errorf("build-only: %+v, %v", b, err)
	}
}

// TestFocusAndArgs: the focus is the definition's External storage specs,
// narrowed by Options.Focus; [Disruptive] is skipped always; ginkgo writes
// its reports in the output directory.
func TestFocusAndArgs(t *testing.T) {
	out := t.TempDir()
	s, err := New(context.Background(), Options{Definition: reference, OutDir: out, Focus: "read-only|two pods", Skip: []string{"multiple"}, Timeout: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "External Storage [Driver: stub.csi.example.com] [Testpattern: CSI Ephemeral-volume (default fs)] ephemeral "
	focus := s.Focus()
	for spec, want := range map[string]bool{
		prefix + "should create read-only inline ephemeral volume":                                                                                                    true,
		prefix + "should support two pods which have the same volume definition":                                                                                      true,
		prefix + "should create read/write inline ephemeral volume":                                                                                                   false,
		"[sig-storage] read-only volumes should create read-only inline volume":                                                                                       false,
		"External Storage [Driver: other.csi.example.com] [Testpattern: CSI Ephemeral-volume (default fs)] ephemeral should create read-only inline ephemeral volume": false,
	} {
		if got := mustMatch(t, focus, spec); got != want {
			t.Errorf("focus %q on %q: %v, want %v", focus, spec, got, want)
		}
	}
	args := s.Args("/k/config")
	for _, want := range []string{"--kubeconfig=/k/config", "--storage.testdriver=" + s.Definition().Path(), "--repo-root=" + filepath.Dir(s.Definition().Path()),
		"--ginkgo.focus=" + focus, "--ginkgo.skip=" + DefaultSkip, "--ginkgo.skip=multiple", "--ginkgo.timeout=20m0s",
		"--ginkgo.json-report=" + filepath.Join(out, "report.json"), "--report-dir=" + out} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
}

// TestBinaryOfAnotherRelease: an e2e binary that reports another release
// than the cluster's is refused; one that reports none is taken.
func TestBinaryOfAnotherRelease(t *testing.T) {
	r, _ := e2ebinary.ParseRelease("v1.37.2")
	for version, ok := range map[string]bool{"v1.37.2": true, "v1.36.4": false, "v1.37.3": false, "v0.0.0-master+$Format:%H$": true} {
		s, err := New(context.Background(), Options{Definition: reference, OutDir: t.TempDir(), E2EBinary: fakeE2E(t, version)})
		if err != nil {
			t.Fatal(err)
		}
		bin, err := s.binary(context.Background(), r)
		var oe *csiplugin.ValidationError
		switch {
		case ok && (err != nil || bin != s.o.E2EBinary):
			t.Errorf("%s on a v1.37.2 cluster: %q, %v; want it taken", version, bin, err)
		case !ok && (!errors.As(err, &oe) || oe.What != string(OptionE2EBinary) || !strings.Contains(oe.Rule, "the cluster runs v1.37.2")):
			t.Errorf("%s on a v1.37.2 cluster: %q, %v; want it refused", version, bin, err)
		}
	}
}

// TestExitCode maps runs to the command's exit codes.
func TestExitCode(t *testing.T) {
	passed := []Spec{{Name: "a", State: "passed"}}
	green := &Report{Result: &Result{Passed: passed}}
	for _, tc := range []struct {
		name string
		rep  *Report
		err  error
		want int
	}{
		{"green", green, nil, ExitPassed},
		{"build", &Report{}, nil, ExitPassed},
		{"none passed", &Report{Result: &Result{}}, nil, ExitFailed},
		{"failed", &Report{Result: &Result{Passed: passed, Failed: []Spec{{Name: "b", State: "failed"}}}}, nil, ExitFailed},
		{"unexplained skip", &Report{Result: &Result{Passed: passed, Unexplained: []string{"c"}}}, nil, ExitFailed},
		{"expected missing", &Report{Result: &Result{Passed: passed, Missing: []string{"d"}}}, nil, ExitFailed},
		{"suite failed", &Report{Result: &Result{Passed: passed}, SuiteErr: errors.New("exit status 1")}, nil, ExitFailed},
		{"bad option", nil, &csiplugin.ValidationError{What: string(OptionDefinition)}, ExitBadInput},
		{"not registered", nil, &NotRegisteredError{Driver: "x"}, ExitBadInput},
		{"could not run", nil, errors.New("connection refused"), ExitIncomplete},
	} {
		if got := ExitCode(tc.rep, tc.err); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
		if tc.rep != nil && tc.err == nil {
			if v := tc.rep.Verdict(); (tc.want == ExitPassed) != (v == "PASSED" || v == "") {
				t.Errorf("%s: verdict %q for exit %d", tc.name, v, tc.want)
			}
		}
	}
}

func mustMatch(t *testing.T, re, s string) bool {
	t.Helper()
	ok, err := regexp.MatchString(re, s)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
