package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/textlogger"

	"github.com/csi-registrar/csi-registrar/internal/storagee2e"
)

func storageCommand(code *int, stdout, stderr io.Writer) *cobra.Command {
	config := genericclioptions.NewConfigFlags(false)
	opts := storagee2e.Options{Names: map[storagee2e.Option]string{}} // filled as the flags are defined
	var verbosity int
	cmd := &cobra.Command{
		Use:   "storage-e2e --definition FILE",
		Short: "Run Kubernetes' External storage e2e tests against a driver deployed on this cluster",
		Long: `Runs the External storage tests of Kubernetes' e2e suite (k8s.io/kubernetes/test/e2e/storage/external,
the specs "External Storage [Driver: NAME] ...") against the CSI driver a test-driver definition describes
(--definition: its name, the capabilities it claims, the volume types it serves; copy
` + storagee2e.ReferenceDefinition + ` of csi-registrar), on the cluster of the current
kubeconfig context, and prints every spec that ran: passed, failed, or skipped and why, each skip explained
by what the definition does not claim.

It NEVER INSTALLS THE DRIVER: deploy it first (e.g. your project's make deploy); the run waits up to
--register-timeout for the kubelets to have it registered (CSINode and Node annotation) and refuses to start otherwise. It needs
no privilege on this machine: the suite creates its own namespaces and pods through the API, with the
kubeconfig's credentials, and removes them.

The e2e test binary must be of the API server's Kubernetes release (a distribution's suffix such as
-eks-... or +k3s1 dropped). Without --e2e-binary it is built at exactly that release with Go and the module
proxy (go test -c k8s.io/kubernetes/test/e2e; about 25 CPU-minutes cold, a minute or two with the Go build
cache warm) and kept in --e2e-cache-dir: the next run takes it from there. --build-only builds it and prints its
path (--kubernetes-version: without asking a cluster), e.g. to carry it to a machine without the module
proxy.

Images: the suite's pods run test images from registries (registry.k8s.io/e2e-test-images/...). The specs of
the CSI Ephemeral-volume pattern (the reference driver's; a definition with InlineVolumes only) need busybox
alone on Linux nodes; the patterns of a StorageClass also need agnhost (subPath) and nginx (volumes' exec).
A cluster that cannot pull them gets them through a repository list (--repo-list, the suite's
KUBE_TEST_REPO_LIST): a YAML file mapping the suite's registries (promoterE2eRegistry: busybox, agnhost,
nginx; dockerLibraryRegistry, sigStorageRegistry, ...) to one it can pull from, or whose images are already on
its nodes. KUBE_TEST_REPO_LIST=FILE <binary> --list-images prints every image name the list gives.

Writes in --out: e2e.log (the suite's output), report.json and junit_01.xml (ginkgo's reports), summary.txt.
[Disruptive] specs are skipped always (they need SSH to the nodes).

Exit codes: 0 every spec that ran passed or skipped for a reason the definition gives, and one passed; 1 a
spec failed, a skip is unexplained, a spec of --expected did not pass, or none passed; 2 bad arguments, or
the driver is not registered; 3 the suite could not run (the cluster, the build, no report).`,
		Example: `  kubectl csi-registrar storage-e2e --definition test/storage-e2e.yaml
  kubectl csi-registrar storage-e2e --definition my-driver.yaml --focus 'should create read-only' --out bin/storage
  kubectl csi-registrar storage-e2e --definition my-driver.yaml --repo-list offline-repos.yaml --context kind-mydriver
  kubectl csi-registrar storage-e2e --build-only --kubernetes-version v1.37.2`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput{fmt.Errorf("storage-e2e takes no arguments (got %q): give the definition with --definition FILE", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			*code = storagee2e.ExitBadInput
			opts.Logger = textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(stderr), textlogger.Verbosity(verbosity)))
			if !cmd.Flags().Changed("out") && opts.BuildOnly {
				opts.OutDir = ""
			}
			suite, err := storagee2e.New(cmd.Context(), opts)
			if err != nil {
				return err
			}
			// A build at a given release asks no cluster.
			var restConfig *rest.Config
			if !opts.BuildOnly || opts.KubernetesVersion == "" {
				if restConfig, err = config.ToRESTConfig(); err != nil {
					return badInput{fmt.Errorf("kubeconfig: %w; pass --kubeconfig and --context as for kubectl", err)}
				}
			}
			rep, err := suite.Run(cmd.Context(), restConfig)
			*code = storagee2e.ExitCode(rep, err)
			if err != nil {
				return err
			}
			if opts.BuildOnly {
				fmt.Fprintln(stdout, rep.Binary)
				return nil
			}
			fmt.Fprint(stdout, rep.Summary)
			fmt.Fprintln(stdout, rep.Verdict())
			return nil
		},
	}
	f := cmd.Flags()
	config.AddFlags(f)
	f.StringVar(&opts.Definition, nameFlag(opts.Names, storagee2e.OptionDefinition, "definition"), "", "the driver's test-driver definition file (YAML or JSON of the suite's driverDefinition); required unless --build-only")
	f.StringVar(&opts.E2EBinary, nameFlag(opts.Names, storagee2e.OptionE2EBinary, "e2e-binary"), "", "Kubernetes' e2e test binary (e2e.test) at the cluster's release; none: built at it in --e2e-cache-dir, or taken from there")
	f.StringVar(&opts.CacheDir, nameFlag(opts.Names, storagee2e.OptionCacheDir, "e2e-cache-dir"), "", "where built e2e test binaries are kept, one directory per release (none: $XDG_CACHE_HOME/csi-registrar/e2e, else ~/.cache/csi-registrar/e2e)")
	f.BoolVar(&opts.BuildOnly, nameFlag(opts.Names, storagee2e.OptionBuildOnly, "build-only"), false, "build the e2e test binary (or find it built), print its path and run nothing")
	f.StringVar(&opts.KubernetesVersion, nameFlag(opts.Names, storagee2e.OptionKubernetesVersion, "kubernetes-version"), "", "with --build-only: the Kubernetes release to build (e.g. v1.37.2) instead of the cluster's; no cluster is asked")
	f.StringVar(&opts.Focus, nameFlag(opts.Names, storagee2e.OptionFocus, "focus"), "", "a regular expression that narrows the definition's specs to those whose text matches it (after the \"External Storage [Driver: NAME]\" prefix)")
	f.StringArrayVar(&opts.Skip, nameFlag(opts.Names, storagee2e.OptionSkip, "skip"), nil, "a regular expression of specs to skip, besides "+storagee2e.DefaultSkip+" (repeatable)")
	f.StringVar(&opts.RepoList, nameFlag(opts.Names, storagee2e.OptionRepoList, "repo-list"), "", "the suite's image repository list (KUBE_TEST_REPO_LIST): a YAML file mapping its registries to ones the cluster can pull from; none: $KUBE_TEST_REPO_LIST if set")
	f.StringVar(&opts.Expected, nameFlag(opts.Names, storagee2e.OptionExpected, "expected"), "", "a file listing the specs that must pass, one full name a line (as the summary prints them)")
	f.StringVar(&opts.OutDir, nameFlag(opts.Names, storagee2e.OptionOutDir, "out"), "storage-e2e", "directory for e2e.log, report.json, junit_01.xml and summary.txt")
	f.DurationVar(&opts.Timeout, nameFlag(opts.Names, storagee2e.OptionTimeout, "timeout"), storagee2e.DefaultTimeout, "the suite's own timeout (ginkgo's); the run gives up 10 minutes after it")
	f.DurationVar(&opts.RegisterTimeout, nameFlag(opts.Names, storagee2e.OptionRegisterTimeout, "register-timeout"), storagee2e.DefaultRegisterTimeout, "how long to wait for the kubelets to have the driver registered before the suite starts")
	f.IntVarP(&verbosity, "v", "v", 0, "log verbosity (stderr, klog's format): 1 adds the suite's command line")
	return cmd
}
