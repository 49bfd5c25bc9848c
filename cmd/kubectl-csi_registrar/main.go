// Command kubectl-csi_registrar is a kubectl plugin (`kubectl csi-registrar`):
// `status [DRIVER]` tells, for every CSI driver and every node, whether the
// kubelet has the driver registered, and why not. The work is done by
// internal/clusterstatus; this file maps flags to its options.
//
// Exit codes: 0 every expected node has every driver and nothing is stale,
// 1 something is not registered or stale, 2 bad arguments, 3 the answer is
// incomplete (a read refused or past its deadline; the output names it).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/csi-registrar/csi-registrar/internal/clusterstatus"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// badInput marks errors in the arguments: exit 2. A bad value of a flag or
// argument is a *csiplugin.ValidationError (the value, the rule, the fix),
// also exit 2.
type badInput struct{ error }

// run is the command; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code, err := execute(ctx, args, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
	}
	return code
}

// execute runs the command line and returns the exit code and the error
// that made it fail: a bad value is a *csiplugin.ValidationError (exit 2).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	code := clusterstatus.ExitHealthy
	root := newRoot(&code, stdout, stderr)
	root.SetArgs(args)
	root.SetContext(ctx)
	err := root.Execute()
	if err != nil {
		var bad badInput
		if errors.As(err, &bad) || csiplugin.IsValidationError(err) || strings.HasPrefix(err.Error(), "unknown command") {
			return clusterstatus.ExitBadInput, err
		}
		if code == clusterstatus.ExitHealthy {
			code = clusterstatus.ExitIncomplete
		}
	}
	return code, err
}

// newRoot is the root command with its subcommands; they set *code.
func newRoot(code *int, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-csi_registrar",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl csi-registrar"},
		Short:         "Cluster-wide view of CSI driver registration with the kubelet",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return badInput{fmt.Errorf("%w; see %s --help", err, c.CommandPath())}
	})
	root.AddCommand(statusCommand(code, stdout, stderr))
	root.AddCommand(verifyCommand(code, stdout, stderr))
	root.AddCommand(storageCommand(code, stdout, stderr))
	return root
}

func statusCommand(code *int, stdout, stderr io.Writer) *cobra.Command {
	config := genericclioptions.NewConfigFlags(true)
	// Names: the argument and -o here, the other inputs as their flags are defined.
	names := map[clusterstatus.Option]string{clusterstatus.OptionDriver: "DRIVER", clusterstatus.OptionFormat: "-o"}
	opts := clusterstatus.Options{ProxyTimeout: clusterstatus.DefaultProxyTimeout, ProxyConcurrency: clusterstatus.DefaultProxyConcurrency, Names: names}
	var watch, stats bool
	cmd := &cobra.Command{
		Use:   "status [DRIVER]",
		Short: "For every CSI driver (or DRIVER), the nodes where the kubelet has it registered, and why not elsewhere",
		Long: `For every CSI driver known to the cluster (CSIDriver objects, CSINode entries, node plugin pods),
one row: the nodes where its node plugin pods are meant to run (expected), those where the kubelet has it
registered (CSINode entry and Node annotation agreeing), not registered, and stale (an entry without a
node plugin pod). -o wide: one row per node with the reason.

Exit codes: 0 every expected node has every driver and nothing is stale; 1 something is not registered
or stale; 2 bad arguments; 3 the answer is incomplete (the output names the unknown parts and the
missing permission).`,
		Example: `  kubectl csi-registrar status
  kubectl csi-registrar status stub.csi.example.com -o wide
  kubectl csi-registrar status -o json --context kind-csi-registrar
  kubectl csi-registrar status -w`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return badInput{fmt.Errorf("status takes at most one DRIVER, got %d arguments %q", len(args), args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Driver = args[0]
			}
			if cmd.Flags().Changed("namespace") {
				opts.Namespace = *config.Namespace
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			restConfig, err := config.ToRESTConfig()
			if err != nil {
				return badInput{fmt.Errorf("kubeconfig: %w; pass --kubeconfig and --context as for kubectl", err)}
			}
			counter := &requestCounter{}
			restConfig.Wrap(counter.wrap)
			if restConfig.QPS == 0 {
				restConfig.QPS, restConfig.Burst = 50, 100 // kubectl's defaults; client-go's 5 would pace the proxy calls
			}
			client, err := kubernetes.NewForConfig(restConfig)
			if err != nil {
				return badInput{fmt.Errorf("kubeconfig: %w", err)}
			}
			start := time.Now()
			printer := &clusterstatus.Printer{Format: opts.Format, Out: stdout}
			report := func(r *clusterstatus.Report) error {
				*code = r.ExitCode()
				_, err := printer.Print(r, watch)
				return err
			}
			if watch {
				err = clusterstatus.Watch(cmd.Context(), client, opts, report)
			} else {
				var r *clusterstatus.Report
				r, err = clusterstatus.Status(cmd.Context(), client, opts)
				if err == nil {
					err = report(r)
				}
			}
			if stats {
				fmt.Fprintf(stderr, "api requests: %d (lists %d, proxy %d, other %d); wall %.2fs\n",
					counter.total.Load(), counter.lists.Load(), counter.proxy.Load(), counter.other.Load(), time.Since(start).Seconds())
			}
			return err
		},
	}
	f := cmd.Flags()
	config.AddFlags(f)
	f.StringVarP(&opts.Format, "output", "o", "", "output format: wide, json or yaml (default: one row per driver)")
	f.BoolVarP(&watch, "watch", "w", false, "after the answer, answer again on every change (rows that changed; json/yaml: whole documents)")
	f.DurationVar(&opts.ProxyTimeout, nameFlag(opts.Names, clusterstatus.OptionProxyTimeout, "proxy-timeout"), opts.ProxyTimeout, "deadline of each proxy call to a registrar or kubelet; one past it is reported as unknown")
	f.IntVar(&opts.ProxyConcurrency, nameFlag(opts.Names, clusterstatus.OptionProxyConcurrency, "proxy-concurrency"), opts.ProxyConcurrency, "most proxy calls in flight")
	f.BoolVar(&opts.NoProxy, "no-proxy", false, "make no proxy calls (reasons from the API objects only)")
	f.BoolVar(&opts.KubeletState, "kubelet-state", false, "read each node's kubelet /metrics (get nodes/proxy) and show the registration paths it holds per driver: retired ones, paths dialed and never registered")
	f.BoolVar(&stats, "stats", false, "print on stderr the API requests made and the wall time")
	return cmd
}

// nameFlag records, as a flag is defined, that flag sets the library's
// input opt, for the library's errors to name the flag (Options.Names);
// it returns flag.
func nameFlag[O comparable](names map[O]string, opt O, flag string) string {
	names[opt] = "--" + flag
	return flag
}

// requestCounter counts the API requests, by kind.
type requestCounter struct {
	total, lists, proxy, other atomic.Int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.total.Add(1)
		switch {
		case strings.Contains(req.URL.Path, "/proxy"):
			c.proxy.Add(1)
		case req.Method == http.MethodGet && !strings.Contains(req.URL.RawQuery, "watch=true"):
			c.lists.Add(1)
		default:
			c.other.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
