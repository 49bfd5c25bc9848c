package storagee2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/csi-registrar/csi-registrar/internal/e2ebinary"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Exit codes of `kubectl csi-registrar storage-e2e`, as ExitCode maps a
// run to them.
const (
	ExitPassed     = 0 // every spec that ran passed or skipped for a reason the definition gives
	ExitFailed     = 1 // a spec failed, a skip is unexplained, an expected spec did not pass, or none passed
	ExitBadInput   = 2 // an option is wrong, or the driver is not registered
	ExitIncomplete = 3 // the suite could not run: the cluster, the build, no report
)

// Report is what Run did.
type Report struct {
	Release e2ebinary.Release // the cluster's, or Options.KubernetesVersion
	Binary  string            // the e2e test binary
	// Result is the judged run; nil when BuildOnly.
	Result *Result
	// SuiteErr is the suite's exit status when it was not 0 (a green
	// report with a failed suite means a suite-level failure).
	SuiteErr error
	// Summary is what summary.txt holds: a header line and Result.Write.
	Summary string
	// Log is the suite's output (e2e.log).
	Log string
}

// ExitCode is the exit code of a run that returned rep and err.
func ExitCode(rep *Report, err error) int {
	var nr *NotRegisteredError
	switch {
	case csiplugin.IsValidationError(err), errors.As(err, &nr):
		return ExitBadInput
	case err != nil:
		return ExitIncomplete
	case rep.Result == nil:
		return ExitPassed
	case len(rep.Result.Passed) == 0, !rep.Result.OK(), rep.SuiteErr != nil:
		return ExitFailed
	}
	return ExitPassed
}

// Verdict says in one line why ExitCode is what it is; "" for a build.
func (r *Report) Verdict() string {
	switch {
	case r.Result == nil:
		return ""
	case len(r.Result.Passed) == 0:
		return fmt.Sprintf("FAILED: no spec passed (focus %q): see %s", r.Result.Focus, r.Log)
	case !r.Result.OK():
		return "FAILED: see the summary above and " + r.Log
	case r.SuiteErr != nil:
		// Green by the report, yet the suite failed: a suite-level node.
		return fmt.Sprintf("FAILED: the suite exited with %v although every spec passed or skipped: see %s", r.SuiteErr, r.Log)
	}
	return "PASSED"
}

// Run runs the suite on the cluster of cfg (with BuildOnly, only finds or
// builds the binary: cfg may be nil when Options.KubernetesVersion is
// set). It returns an error when the suite could not run or the input is
// wrong (*csiplugin.ValidationError, *NotRegisteredError); a run whose specs failed
// returns a Report and no error (ExitCode tells).
func (s *Suite) Run(ctx context.Context, cfg *rest.Config) (*Report, error) {
	log := s.o.Logger
	var client kubernetes.Interface
	if cfg != nil {
		rc := rest.CopyConfig(cfg)
		if rc.QPS == 0 {
			rc.QPS, rc.Burst = 50, 100
		}
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		client = c
	}
	rep := &Report{}
	if s.release != nil {
		rep.Release = *s.release
	} else {
		if client == nil {
			return nil, errors.New("no cluster to ask its version: give a kubeconfig, or the Kubernetes version to build")
		}
		r, err := serverRelease(client, cfg.Host, log)
		if err != nil {
			return nil, err
		}
		rep.Release = r
	}
	bin, err := s.binary(ctx, rep.Release)
	if err != nil {
		return nil, err
	}
	rep.Binary = bin
	if s.o.BuildOnly {
		return rep, nil
	}

	if err := waitRegistered(ctx, client, s.def, s.o.RegisterTimeout, log); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.o.OutDir, 0o755); err != nil {
		return nil, &csiplugin.ValidationError{What: s.o.name(OptionOutDir), Value: s.o.OutDir, Rule: "cannot be created: " + errText(err), Fix: "name a directory you can write"}
	}
	run, err := s.runSuite(ctx, cfg, bin)
	if err != nil {
		return nil, err
	}
	rep.Log, rep.SuiteErr = run.log, run.err
	specs, err := ReadReport(run.report)
	if err != nil {
		return nil, fmt.Errorf("%w (the suite wrote no report: see %s)", err, run.log)
	}
	res := Judge(s.def, specs, s.expected)
	res.Focus = run.focus
	rep.Result = &res
	var sb strings.Builder
	fmt.Fprintf(&sb, "External storage e2e, %s, Kubernetes %s at %s, %s\n", s.def, rep.Release, cfg.Host, time.Now().UTC().Format(time.RFC3339))
	res.Write(&sb)
	rep.Summary = sb.String()
	if err := os.WriteFile(filepath.Join(s.o.OutDir, "summary.txt"), []byte(rep.Summary), 0o644); err != nil {
		return rep, err
	}
	return rep, nil
}

// serverRelease asks the API server its version and maps it to the release
// whose suite fits it.
func serverRelease(client kubernetes.Interface, host string, log logr.Logger) (e2ebinary.Release, error) {
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return e2ebinary.Release{}, fmt.Errorf("ask the API server at %s its version: %w", host, err)
	}
	r, dropped, err := e2ebinary.ServerRelease(v.GitVersion)
	if err != nil {
		return e2ebinary.Release{}, fmt.Errorf("the API server at %s: %w", host, err)
	}
	if dropped != "" {
		log.Info("The API server's version has a distribution's suffix: the suite of the Kubernetes release is used", "gitVersion", v.GitVersion, "release", r)
	}
	return r, nil
}

// binary returns the e2e test binary of release r: the one given (which
// must report r, when it reports a release) or the one built in the cache.
func (s *Suite) binary(ctx context.Context, r e2ebinary.Release) (string, error) {
	log := s.o.Logger
	if s.o.E2EBinary != "" {
		got, err := e2ebinary.ParseRelease(s.binaryVersion)
		switch {
		case err != nil:
			log.Info("The e2e test binary does not say which release it is (built without the version stamped): it must be the cluster's",
				"path", s.o.E2EBinary, "version", s.binaryVersion, "cluster", r)
		case got != r:
			return "", &csiplugin.ValidationError{What: s.o.name(OptionE2EBinary), Value: s.o.E2EBinary,
				Rule: fmt.Sprintf("is the e2e test binary of Kubernetes %s; the cluster runs %s", got, r),
				Fix:  "give none to have it built at " + r.String() + ", or one built at that release"}
		}
		return s.o.E2EBinary, nil
	}
	bin, err := e2ebinary.Build(ctx, e2ebinary.Options{Release: r, CacheDir: s.o.CacheDir, Logger: log})
	if err != nil {
		return "", fmt.Errorf("build Kubernetes' e2e test binary at %s: %w", r, err)
	}
	if !bin.Built {
		log.Info("Using the e2e test binary built before", "path", bin.Path, "release", r)
	}
	return bin.Path, nil
}
