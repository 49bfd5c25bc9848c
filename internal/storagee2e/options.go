package storagee2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/yaml"

	"github.com/csi-registrar/csi-registrar/internal/e2ebinary"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Defaults of Options.
const (
	DefaultTimeout         = 30 * time.Minute
	DefaultRegisterTimeout = time.Minute
	// DefaultSkip is always skipped: [Disruptive] specs act on nodes over
	// SSH, which the suite is not given.
	DefaultSkip = `\[Disruptive\]`
)

// Options say which suite to run, against which definition, and where the
// results go.
type Options struct {
	// Definition is the test-driver definition file: the driver's name, its
	// capabilities, the volume types it serves (ReferenceDefinition is the
	// one to copy). Required unless BuildOnly.
	Definition string
	// E2EBinary is Kubernetes' e2e test binary to run. It must run, and
	// when it reports a release (its --version), be the cluster's. Empty:
	// the binary is built at the cluster's version in CacheDir, or taken
	// from there when built before.
	E2EBinary string
	// CacheDir is where built binaries are kept; empty:
	// e2ebinary.DefaultCacheDir().
	CacheDir string
	// BuildOnly: build the binary (or find it built) and run nothing.
	BuildOnly bool
	// KubernetesVersion is, with BuildOnly, the release to build (v1.37.2)
	// instead of the cluster's: no cluster is asked.
	KubernetesVersion string
	// Focus is a regular expression that narrows the specs run to those
	// of the definition's whose text matches it after the External
	// storage prefix (Definition.Focus); empty: all of them.
	Focus string
	// Skip are regular expressions of specs to skip besides DefaultSkip.
	Skip []string
	// RepoList is the suite's image repository list (KUBE_TEST_REPO_LIST):
	// a YAML file mapping its registries (promoterE2eRegistry, ...) to the
	// ones to pull from. Empty: the caller's KUBE_TEST_REPO_LIST, if set.
	RepoList string
	// Expected is a file listing the specs that must pass, one a line;
	// empty: none.
	Expected string
	// OutDir receives the suite's log (e2e.log), ginkgo's reports
	// (report.json, junit_01.xml) and the summary (summary.txt). Required
	// unless BuildOnly.
	OutDir string
	// Timeout is the suite's own (ginkgo's --timeout); default
	// DefaultTimeout. Run gives up 10 minutes after it.
	Timeout time.Duration
	// RegisterTimeout is how long Run waits for the kubelets to have the
	// driver registered; default DefaultRegisterTimeout.
	RegisterTimeout time.Duration
	// Logger receives the progress. The zero Logger discards it.
	Logger logr.Logger
	// Names are what the errors call the inputs (a command: its flags);
	// an input without a name here is called by its field, Options.X.
	Names map[Option]string
}

// Suite is a run checked by New: the definition read, the paths absolute.
type Suite struct {
	o        Options
	def      *Definition // nil when BuildOnly without a definition
	expected []string
	release  *e2ebinary.Release // from KubernetesVersion
	// binaryVersion is what E2EBinary's --version printed.
	binaryVersion string
}

// New checks o once: every file it names is read (the definition, the
// repository list, the expected list) and the e2e binary given is run with
// --version. Errors about o are *csiplugin.ValidationError, naming the
// input as o.Names says.
func New(ctx context.Context, o Options) (*Suite, error) {
	for _, p := range []*string{&o.Definition, &o.E2EBinary, &o.CacheDir, &o.RepoList, &o.Expected, &o.OutDir} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return nil, err
			}
			*p = abs
		}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RegisterTimeout == 0 {
		o.RegisterTimeout = DefaultRegisterTimeout
	}
	s := &Suite{o: o}
	if err := s.checkBuild(); err != nil {
		return nil, err
	}
	if o.Definition != "" || !o.BuildOnly {
		if o.Definition == "" {
			return nil, &csiplugin.ValidationError{What: o.name(OptionDefinition), Rule: "must be given",
				Fix: "name the driver's test-driver definition file, e.g. a copy of " + ReferenceDefinition + " with DriverInfo.Name set to the driver's name"}
		}
		def, err := loadDefinition(o.Definition, o.name(OptionDefinition))
		if err != nil {
			return nil, err
		}
		s.def = def
	}
	if o.E2EBinary != "" {
		v, err := e2ebinary.BinaryVersion(ctx, o.E2EBinary)
		if err != nil {
			return nil, &csiplugin.ValidationError{What: o.name(OptionE2EBinary), Value: o.E2EBinary,
				Rule: "does not run as Kubernetes' e2e test binary: " + errText(err),
				Fix:  "give the e2e.test of `go test -c k8s.io/kubernetes/test/e2e` at the cluster's version, or none to have it built"}
		}
		s.binaryVersion = v
	}
	if err := o.checkDir(OptionCacheDir, o.CacheDir, "name a directory for the built e2e test binaries, or none for the default"); err != nil {
		return nil, err
	}
	if o.BuildOnly {
		return s, nil
	}
	if err := s.checkRun(); err != nil {
		return nil, err
	}
	return s, nil
}

// Definition is the definition read; nil for a build without one.
func (s *Suite) Definition() *Definition { return s.def }

// checkBuild checks the options about the binary.
func (s *Suite) checkBuild() error {
	o := s.o
	switch {
	case o.KubernetesVersion != "" && !o.BuildOnly:
		return &csiplugin.ValidationError{What: o.name(OptionKubernetesVersion), Value: o.KubernetesVersion, Rule: "applies to a build only: a run is of the cluster's version",
			Fix: "add " + o.name(OptionBuildOnly) + ", or leave the version out to run at the cluster's"}
	case o.BuildOnly && o.E2EBinary != "":
		return &csiplugin.ValidationError{What: o.name(OptionE2EBinary), Value: o.E2EBinary, Rule: "gives the binary " + o.name(OptionBuildOnly) + " would build",
			Fix: "leave one of the two out"}
	case o.KubernetesVersion != "":
		r, err := e2ebinary.ParseRelease(o.KubernetesVersion)
		if err != nil {
			var re *e2ebinary.ReleaseError
			errors.As(err, &re)
			return &csiplugin.ValidationError{What: o.name(OptionKubernetesVersion), Value: o.KubernetesVersion, Rule: strings.TrimPrefix(re.Error(), `"`+re.Value+`" `),
				Fix: "give a release of k8s.io/kubernetes, e.g. v1.37.2, or leave it out to build at the cluster's version"}
		}
		s.release = &r
	}
	return nil
}

// checkRun checks the options of a run.
func (s *Suite) checkRun() error {
	o := s.o
	if err := o.checkRegexp(OptionFocus, o.Focus); err != nil {
		return err
	}
	for _, re := range o.Skip {
		if err := o.checkRegexp(OptionSkip, re); err != nil {
			return err
		}
	}
	if o.RepoList != "" {
		if err := o.checkRepoList(o.RepoList, s.o.Logger); err != nil {
			return err
		}
	}
	if o.Expected != "" {
		e, err := ReadExpected(o.Expected)
		if err != nil {
			return &csiplugin.ValidationError{What: o.name(OptionExpected), Value: o.Expected, Rule: errText(err),
				Fix: "list the full names of the specs that must pass, one a line, as the summary prints them"}
		}
		s.expected = e
	}
	if o.OutDir == "" {
		return &csiplugin.ValidationError{What: o.name(OptionOutDir), Rule: "must be given", Fix: "name a directory for the suite's log and reports"}
	}
	if err := o.checkDir(OptionOutDir, o.OutDir, "name a directory for the suite's log and reports"); err != nil {
		return err
	}
	if o.Timeout < time.Minute {
		return &csiplugin.ValidationError{What: o.name(OptionTimeout), Value: o.Timeout.String(), Rule: "must be at least 1m: the suite's setup alone takes seconds",
			Fix: "use e.g. " + DefaultTimeout.String()}
	}
	if o.RegisterTimeout < 0 {
		return &csiplugin.ValidationError{What: o.name(OptionRegisterTimeout), Value: o.RegisterTimeout.String(), Rule: "must not be negative",
			Fix: "use e.g. " + DefaultRegisterTimeout.String() + ", or 0 for the default"}
	}
	return nil
}

// checkRegexp refuses a value that is not a regular expression (ginkgo
// reads focus and skip with Go's regexp package).
func (o *Options) checkRegexp(opt Option, v string) error {
	if _, err := regexp.Compile(v); err != nil {
		return &csiplugin.ValidationError{What: o.name(opt), Value: v, Rule: "is not a regular expression: " + errText(err),
			Fix: "write one as Go's regexp package (RE2) reads it; escape [ and ] as \\[ and \\]"}
	}
	return nil
}

// checkDir refuses a path that exists and is not a directory.
func (o *Options) checkDir(opt Option, p, fix string) error {
	if p == "" {
		return nil
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return &csiplugin.ValidationError{What: o.name(opt), Value: p, Rule: "cannot be read: " + errText(err), Fix: fix}
	case !fi.IsDir():
		return &csiplugin.ValidationError{What: o.name(opt), Value: p, Rule: "is a file, not a directory", Fix: fix}
	}
	return nil
}

// RepoListKeys are the registries a repository list may map (test/utils/image
// of Kubernetes 1.37, RegistryList); other releases know others.
func RepoListKeys() []string {
	return []string{"promoterE2eRegistry", "buildImageRegistry", "invalidRegistry", "gcEtcdRegistry", "gcRegistry",
		"sigStorageRegistry", "privateRegistry", "dockerLibraryRegistry", "cloudProviderGcpRegistry"}
}

// checkRepoList reads a repository list: a YAML mapping of registries to
// registries. A key the suite of 1.37 does not know is logged: the suite
// ignores it without a word, and a misspelt one leaves that registry as it
// is.
func (o *Options) checkRepoList(p string, log logr.Logger) error {
	const fix = "write a YAML mapping of the suite's registries to yours, e.g. promoterE2eRegistry: registry.example.com/e2e-test-images"
	data, err := os.ReadFile(p)
	if err != nil {
		return &csiplugin.ValidationError{What: o.name(OptionRepoList), Value: p, Rule: "cannot be read: " + errText(err), Fix: fix}
	}
	var m map[string]string
	if err := yaml.Unmarshal(data, &m); err != nil {
		return &csiplugin.ValidationError{What: o.name(OptionRepoList), Value: p, Rule: "is not a YAML mapping of registries: " + errText(err), Fix: fix}
	}
	if len(m) == 0 {
		return &csiplugin.ValidationError{What: o.name(OptionRepoList), Value: p, Rule: "maps no registry", Fix: fix}
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(RepoListKeys(), k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		log.Info("The repository list maps registries the suite of Kubernetes 1.37 does not know: it ignores them", "file", p, "unknown", unknown, "known", RepoListKeys())
	}
	return nil
}
