//go:build e2e

package storage

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/kind/e2e"
)

// `make e2e-storage` builds what these flags name and runs the test binary
// under the node lock (kind/storage/storage.mk). Environment as kind/e2e's:
// E2E_PROVIDER (local or kind), E2E_IMAGE_ARCHIVE (the csi-registrar image
// manifests/ runs), E2E_KEEP (leave the cluster and the driver up).
var (
	definitionFlag = flag.String("definition", "manifests/examples/storage-e2e/stub.csi.example.com.yaml", "test-driver definition file (relative paths: from the repository root)")
	expectedFlag   = flag.String("expected", "", "list of specs that must pass (kind/storage/expected-pass.txt for the reference driver); empty: none")
	e2eFlag        = flag.String("e2e-test", "", "Kubernetes' e2e test binary at the cluster's version (kind/storage/build-e2e.sh)")
	repoListFlag   = flag.String("repo-list", "", "the suite's image repository list (KUBE_TEST_REPO_LIST; kind/storage/images.sh)")
	driverFlag     = flag.String("driver", "manifests", "the driver to deploy: a kustomize directory or a manifest file")
	imagesFlag     = flag.String("images", "", "image archives to load on every node besides E2E_IMAGE_ARCHIVE, comma-separated (busybox, the driver's)")
	focusFlag      = flag.String("focus", "", "ginkgo focus; default: the definition's claimed volume types (Definition.Focus)")
	skipFlag       = flag.String("skip", `\[Disruptive\]`, "ginkgo skip")
	outFlag        = flag.String("out", "bin/e2e/storage", "directory for the suite's log and reports")
	suiteTimeout   = flag.Duration("suite-timeout", 30*time.Minute, "the e2e suite's own timeout")
)

func logf(format string, args ...any) {
	fmt.Printf("e2e-storage %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// TestExternalStorage deploys the driver, runs the External storage specs of
// the definition's volume types, and judges the report (report.go).
func TestExternalStorage(t *testing.T) {
	root, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	def, err := LoadDefinition(abs(*definitionFlag))
	if err != nil {
		t.Fatal(err)
	}
	logf("definition %s: %s", def.Path(), def)
	var expected []string
	if *expectedFlag != "" {
		if expected, err = ReadExpected(abs(*expectedFlag)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct{ flag, val string }{{"-e2e-test", *e2eFlag}, {"-repo-list", *repoListFlag}} {
		if _, err := os.Stat(abs(f.val)); f.val == "" || err != nil {
			t.Fatalf("%s=%q: need the file (make e2e-storage builds it)", f.flag, f.val)
		}
	}
	provider := os.Getenv("E2E_PROVIDER")
	if provider == "" {
		provider = "local"
	}
	if os.Getenv("LOCALNODE_LOCKED") != "1" {
		t.Fatal("the local node and kind are shared: run this through `make e2e-storage`, which holds their lock (/tmp/csi-registrar-localnode.lock)")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *suiteTimeout+15*time.Minute)
	defer cancel()
	p, err := e2e.NewProvider(provider, root)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	started, err := p.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logf("provider %s: cluster up in %s (started now: %v)", p.Name(), time.Since(start).Round(100*time.Millisecond), started)
	keep := os.Getenv("E2E_KEEP") != ""
	if !keep { // as kind/e2e's suite: down at the end unless E2E_KEEP
		t.Cleanup(func() {
			if err := p.Down(context.Background()); err != nil {
				t.Errorf("tear-down: %v", err)
			}
		})
	}
	cl, err := e2e.NewCluster(p, root)
	if err != nil {
		t.Fatal(err)
	}

	archives := strings.FieldsFunc(*imagesFlag, func(r rune) bool { return r == ',' })
	if a := os.Getenv("E2E_IMAGE_ARCHIVE"); a != "" {
		archives = append([]string{a}, archives...)
	}
	for _, a := range archives {
		t0 := time.Now()
		if err := p.LoadImage(ctx, abs(a)); err != nil {
			t.Fatal(err)
		}
		logf("loaded %s in %s", a, time.Since(t0).Round(100*time.Millisecond))
	}

	driver := abs(*driverFlag)
	kind := "-f"
	if st, err := os.Stat(driver); err != nil {
		t.Fatalf("-driver=%s: %v (want a kustomize directory or a manifest file)", *driverFlag, err)
	} else if st.IsDir() {
		kind = "-k"
	}
	t0 := time.Now()
	if _, err := cl.Kubectl(ctx, "apply", kind, driver); err != nil {
		t.Fatal(err)
	}
	if !keep {
		t.Cleanup(func() {
			dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer dcancel()
			if _, err := cl.Kubectl(dctx, "delete", kind, driver, "--ignore-not-found", "--wait=true", "--timeout=150s"); err != nil {
				t.Errorf("removing the driver: %v", err)
			}
		})
	}
	if err := waitRegistered(ctx, cl, def.DriverInfo.Name, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	logf("driver %s registered on every node %s after apply", def.DriverInfo.Name, time.Since(t0).Round(100*time.Millisecond))

	out := abs(*outFlag)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(out, "report.json")
	_ = os.Remove(report)
	focus := *focusFlag
	if focus == "" {
		focus = def.Focus()
	}
	args := []string{
		"-test.timeout=0",
		"--kubeconfig=" + p.Kubeconfig(),
		"--provider=local", // no cloud: the framework's null provider
		"--storage.testdriver=" + def.Path(),
		// FromFile paths in the definition: relative to its directory.
		"--repo-root=" + filepath.Dir(def.Path()),
		"--ginkgo.focus=" + focus,
		"--ginkgo.skip=" + *skipFlag,
		"--ginkgo.timeout=" + suiteTimeout.String(),
		"--ginkgo.no-color",
		"--ginkgo.json-report=" + report,
		"--report-dir=" + out,
	}
	logPath := filepath.Join(out, "e2e.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, abs(*e2eFlag), args...)
	// TMPDIR: the framework writes temporary kuberc files at start-up and
	// leaves them; in the test's own directory they go when it ends.
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+abs(*repoListFlag), "KUBECONFIG="+p.Kubeconfig(), "TMPDIR="+t.TempDir())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	logf("running %s %s (log: %s)", *e2eFlag, strings.Join(args, " "), logPath)
	t0 = time.Now()
	runErr := cmd.Run()
	logf("suite finished in %s (%v)", time.Since(t0).Round(100*time.Millisecond), runErr)

	specs, err := ReadReport(report)
	if err != nil {
		t.Fatalf("%v (the suite wrote no report: see %s)", err, logPath)
	}
	res := Judge(def, specs, expected)
	var sb strings.Builder
	fmt.Fprintf(&sb, "External storage e2e, %s, provider %s, %s\n", def, p.Name(), time.Now().UTC().Format(time.RFC3339))
	res.Write(&sb)
	fmt.Print(sb.String())
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(sb.String()), 0o644); err != nil {
		t.Error(err)
	}
	switch {
	case len(res.Passed) == 0:
		t.Errorf("no spec passed (focus %q): see %s", focus, logPath)
	case !res.OK():
		t.Errorf("not green: see above and %s", logPath)
	case runErr != nil:
		// Green by the report, yet the suite failed: a suite-level node.
		t.Errorf("the suite exited with %v: see %s", runErr, logPath)
	}
}

// waitRegistered waits until the kubelet of every node has the driver in its
// CSINode: the specs' pods may land on any node.
func waitRegistered(ctx context.Context, cl *e2e.Cluster, driver string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		nodes, err := cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, n := range nodes.Items {
				cn, err := cl.Client.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
				if err != nil || len(drivercases.CSINodeEntries(cn, driver)) == 0 {
					missing = append(missing, n.Name)
				}
			}
		}
		if err == nil && len(missing) == 0 && len(nodes.Items) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("driver %s not registered after %s on nodes %v (list error: %v)", driver, timeout, missing, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
