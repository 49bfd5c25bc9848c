package storagee2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// suiteRun is one run of the e2e test binary.
type suiteRun struct {
	focus  string
	log    string // its output
	report string // ginkgo's JSON report
	err    error  // its exit status
}

// Focus is the ginkgo focus of the run: the definition's External storage
// specs (Definition.Focus), narrowed by Options.Focus.
func (s *Suite) Focus() string {
	f := s.def.Focus()
	if s.o.Focus != "" {
		f += ".*(?:" + s.o.Focus + ")"
	}
	return f
}

// Args are the e2e test binary's arguments for a run with the kubeconfig
// file kubeconfig; ginkgo writes its reports in Options.OutDir.
func (s *Suite) Args(kubeconfig string) []string {
	args := []string{
		"-test.timeout=0", // ginkgo's --timeout bounds the run
		"--kubeconfig=" + kubeconfig,
		"--provider=local", // no cloud: the framework's null provider
		"--storage.testdriver=" + s.def.Path(),
		// FromFile paths in the definition: relative to its directory.
		"--repo-root=" + filepath.Dir(s.def.Path()),
		"--ginkgo.focus=" + s.Focus(),
		"--ginkgo.skip=" + DefaultSkip,
	}
	for _, sk := range s.o.Skip {
		args = append(args, "--ginkgo.skip="+sk)
	}
	return append(args,
		"--ginkgo.timeout="+s.o.Timeout.String(),
		"--ginkgo.no-color",
		"--ginkgo.json-report="+filepath.Join(s.o.OutDir, "report.json"),
		"--report-dir="+s.o.OutDir,
	)
}

// runSuite runs the e2e test binary bin against the cluster of cfg, its
// output into e2e.log of the output directory. On ctx's end the suite gets
// SIGINT, so that ginkgo removes its namespaces, and a minute more.
func (s *Suite) runSuite(ctx context.Context, cfg *rest.Config, bin string) (*suiteRun, error) {
	log := s.o.Logger
	// TMPDIR: the framework writes temporary kuberc files at start-up and
	// leaves them; the kubeconfig holds credentials. Both go at the end.
	tmp, err := os.MkdirTemp("", "storage-e2e-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	run := &suiteRun{
		focus:  s.Focus(),
		log:    filepath.Join(s.o.OutDir, "e2e.log"),
		report: filepath.Join(s.o.OutDir, "report.json"),
	}
	if err := os.Remove(run.report); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	logFile, err := os.Create(run.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()

	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout+10*time.Minute)
	defer cancel()
	args := s.Args(kubeconfig)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "TMPDIR="+tmp)
	if s.o.RepoList != "" {
		cmd.Env = append(cmd.Env, "KUBE_TEST_REPO_LIST="+s.o.RepoList)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	repoList := s.o.RepoList
	if repoList == "" {
		repoList = os.Getenv("KUBE_TEST_REPO_LIST")
	}
	log.Info("Running the External storage specs of the definition", "binary", bin, "definition", s.def.Path(),
		"focus", run.focus, "skip", append([]string{DefaultSkip}, s.o.Skip...), "repoList", repoList, "log", run.log)
	log.V(1).Info("Suite command", "args", strings.Join(args, " "))
	start := time.Now()
	run.err = cmd.Run()
	if ctx.Err() != nil && run.err != nil {
		run.err = fmt.Errorf("%w (%v)", run.err, context.Cause(ctx))
	}
	log.Info("The suite finished", "took", time.Since(start).Round(100*time.Millisecond), "exit", errText(run.err))
	return run, nil
}
