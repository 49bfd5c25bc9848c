//go:build e2e

package storage

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/textlogger"

	"github.com/csi-registrar/csi-registrar/internal/storagee2e"
	"github.com/csi-registrar/csi-registrar/kind/e2e"
)

// `make e2e-storage` builds what these flags name and runs the test binary
// under the node lock (kind/storage/storage.mk). Environment as kind/e2e's:
// E2E_PROVIDER (local or kind), E2E_IMAGE_ARCHIVE (the csi-registrar image
// manifests/ runs), E2E_KEEP (leave the cluster and the driver up).
var (
	definitionFlag = flag.String("definition", storagee2e.ReferenceDefinition, "test-driver definition file (relative paths: from the repository root)")
	expectedFlag   = flag.String("expected", "", "list of specs that must pass (kind/storage/expected-pass.txt for the reference driver); empty: none")
	e2eFlag        = flag.String("e2e-test", "", "Kubernetes' e2e test binary at the cluster's version (kind/storage/build-e2e.sh)")
	repoListFlag   = flag.String("repo-list", "", "the suite's image repository list (KUBE_TEST_REPO_LIST; kind/storage/images.sh)")
	driverFlag     = flag.String("driver", "manifests", "the driver to deploy: a kustomize directory or a manifest file")
	imagesFlag     = flag.String("images", "", "image archives to load on every node besides E2E_IMAGE_ARCHIVE, comma-separated (busybox, the driver's)")
	focusFlag      = flag.String("focus", "", "regular expression narrowing the definition's specs (storagee2e.Options.Focus); empty: all of them")
	skipFlag       = flag.String("skip", "", "regular expression of specs to skip besides "+storagee2e.DefaultSkip)
	outFlag        = flag.String("out", "bin/e2e/storage", "directory for the suite's log and reports")
	suiteTimeout   = flag.Duration("suite-timeout", storagee2e.DefaultTimeout, "the e2e suite's own timeout")
)

func logf(format string, args ...any) {
	fmt.Printf("e2e-storage %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// TestExternalStorage brings the cluster up, loads the images, deploys the
// driver, and runs the External storage specs of the definition's volume
// types as `kubectl csi-registrar storage-e2e` runs them
// (internal/storagee2e), which judges the report.
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
	opts := storagee2e.Options{
		Definition: abs(*definitionFlag), E2EBinary: abs(*e2eFlag), RepoList: abs(*repoListFlag), Expected: abs(*expectedFlag),
		OutDir: abs(*outFlag), Focus: *focusFlag, Timeout: *suiteTimeout,
		// The driver's pods start after the apply below: images loaded, not pulled.
		RegisterTimeout: 3 * time.Minute,
		Logger:          textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stdout))),
	}
	if *skipFlag != "" {
		opts.Skip = []string{*skipFlag}
	}
	for _, f := range []struct{ flag, val string }{{"-e2e-test", opts.E2EBinary}, {"-repo-list", opts.RepoList}} {
		if f.val == "" {
			t.Fatalf("%s is empty: make e2e-storage builds the file it names", f.flag)
		}
	}
	// Every input checked before the cluster is touched.
	suite, err := storagee2e.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	def := suite.Definition()
	logf("definition %s: %s", def.Path(), def)
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
	logf("driver applied in %s; the run waits for its registration", time.Since(t0).Round(100*time.Millisecond))

	// The run of kubectl csi-registrar storage-e2e, on the provider's cluster.
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := suite.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("provider %s\n%s%s\n", p.Name(), rep.Summary, rep.Verdict())
	if code := storagee2e.ExitCode(rep, nil); code != storagee2e.ExitPassed {
		t.Errorf("exit code %d: %s", code, rep.Verdict())
	}
}
