package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	"github.com/csi-registrar/csi-registrar/internal/verify"
)

// DefaultNodeImage is the node pod's image where the cluster can pull: a
// shell with nsenter, chroot, wget and awk.
const DefaultNodeImage = "busybox:1.37"

func verifyCommand(code *int, stdout, stderr io.Writer) *cobra.Command {
	config := genericclioptions.NewConfigFlags(false)
	var cfg verify.Config
	var kubectlPath string
	cmd := &cobra.Command{
		Use:   "verify -f DIR|FILE [-f ...]",
		Short: "Run the driver registration cases on a driver's manifests on this cluster (disruptive)",
		Long: `Installs the driver of each -f (a kustomize directory or a manifest file) with csi-registrar
(--registrar-image) in place of node-driver-registrar (or of the csi-registrar sidecar they run), runs
the registration cases that make sense for any CSI driver -- deployed, registrar pod deleted, kubelet
restarted, registration socket removed, driver container killed, rollout, uninstalled -- judged by the
kubelet and the API (CSINode, the Node annotation, plugins_registry, the kubelet's log), never by a
registrar's logs, and prints one table.
--compare runs them again with other registrar images, side by side.

The rollout case rolls the node plugin workload (a pod template annotation) as its manifests say and
reports per node how long the driver was unregistered and, when its CSIDriver lists Ephemeral, how many
mounts of pods with a CSI inline volume (--node-image, running sleep) started every 0.3 s failed; it
judges only manifests with csi-registrar's --rolling-update, and says "measured" otherwise.
--case runs only the named cases (1 and 7 always run). Case 8_rollouts_with_faults runs only when named:
--rollouts rollouts, each with a fault of cases 2-5 drawn at random within 3 s of the template change; it
reports the registered time over the run, failed mounts, container restarts, and the open files, threads
and memory of the process serving the registration socket and the files in plugins_registry, before and
after (verdict "measured"; FAIL if not registered at the end or plugins_registry grew).

DISRUPTIVE: on the node it acts on (one unless --node or --all-nodes) it restarts the kubelet, removes
the registration socket and kills the driver's container, through a short-lived privileged pod
(--node-image; hostPID, the host's network, the host's root). The kubelet is restarted with systemd
(nsenter into PID 1) or, without systemd, by killing it when a supervisor runs it. It refuses a node
without the label ` + verify.MarkerLabel + `=true (the project's local node and kind clusters carry it) unless
--i-know-this-is-disruptive, and a cluster where the driver is installed or any object of the
manifests exists. Everything it creates carries the label ` + verify.RunLabel + `, is removed at the end and
on SIGINT/SIGTERM; --cleanup removes what an interrupted run left.

` + verify.NeedsText + `

Ready for rolling updates? With manifests that turn on --rolling-update (or when named with
--case on any manifests), R1-R5 say whether the driver can run as two instances on a node: R1 the
manifests (no host port, a CSI socket per pod, a surge), R2 a volume published through the old instance
is unpublished through the new one and NodeGetInfo agrees on both, R3 each instance serves and removes
only its own CSI socket, R4 the driver serves a few seconds after SIGTERM, R5 the old instance takes the
registration back when the new driver dies after its confirmation, and the new one claims it again only
once its driver has been ready for 10 s. Each verdict names the cause
and the fix (docs/writing-a-driver.md, "Is my driver ready for rolling updates?"); "not judged"
says what verify would need. After each case, the driver's volumes whose pods are gone are listed under
"left on the node" with the commands that remove them (--remove-left runs them).

Exit codes: 0 every case passed; 1 a case failed or the driver left something on the node; 2 bad
arguments or refused; 3 the cases could not run (setup failed, interrupted) or verify could not check
a case (its own error, not the driver's).`,
		Example: `  kubectl csi-registrar verify -f deploy/kubernetes/ --registrar-image registry.example.com/csi-registrar:v0.1.0
  kubectl csi-registrar verify -f node.yaml --node worker-1 --i-know-this-is-disruptive
  kubectl csi-registrar verify -f a/ -f b.yaml --compare registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0
  kubectl csi-registrar verify --cleanup`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput{fmt.Errorf("verify takes its manifests with -f, not as arguments (got %q): verify -f %s", args, strings.Join(args, " -f "))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			*code = verify.ExitRefused
			if err := cfg.Validate(); err != nil {
				return err
			}
			restConfig, err := config.ToRESTConfig()
			if err != nil {
				return badInput{fmt.Errorf("kubeconfig: %w; pass --kubeconfig and --context as for kubectl", err)}
			}
			if cfg.Cleanup {
				client, err := kubernetes.NewForConfig(restConfig)
				if err != nil {
					return badInput{fmt.Errorf("kubeconfig: %w", err)}
				}
				removed, err := verify.Cleanup(cmd.Context(), client)
				for _, r := range removed {
					fmt.Fprintln(stdout, "removed", r)
				}
				if len(removed) == 0 && err == nil {
					fmt.Fprintf(stdout, "nothing labelled %s: no leftovers\n", verify.RunLabel)
				}
				if err != nil {
					*code = verify.ExitIncomplete
					return err
				}
				*code = verify.ExitPassed
				return nil
			}
			cfg.RESTConfig = restConfig
			cfg.Kubectl = kubectlRunner(kubectlPath, config)
			cfg.Out = stdout
			ctx, cancel := context.WithTimeout(cmd.Context(), cfg.Timeout)
			defer cancel()
			c, err := verify.Run(ctx, cfg)
			*code = c
			return err
		},
	}
	f := cmd.Flags()
	config.AddFlags(f)
	f.StringArrayVarP(&cfg.Files, "filename", "f", nil, "the driver's manifests: a kustomize directory or a manifest file (repeat for several drivers)")
	f.StringArrayVar(&cfg.Nodes, "node", nil, "a node to act on (repeatable); default: one Ready node, one with the label "+verify.MarkerLabel+"=true if any")
	f.BoolVar(&cfg.AllNodes, "all-nodes", false, "act on every node (the workload runs where its manifests say)")
	f.StringVar(&cfg.NodeImage, "node-image", DefaultNodeImage, "image of the privileged node pod: a shell with nsenter, chroot, wget and awk (busybox), also the image of the rollout case's inline-volume pods; offline, load an archive of one into the nodes first")
	f.StringVar(&cfg.RegistrarImage, "registrar-image", "csi-registrar:dev", "the csi-registrar image that replaces every node-driver-registrar image")
	f.StringArrayVar(&cfg.Compare, "compare", nil, "another registrar image, or an image archive (.tar) of one already on the nodes: the cases run again with it in place of node-driver-registrar (repeatable)")
	f.BoolVar(&cfg.Disruptive, "i-know-this-is-disruptive", false, "run on nodes without the label "+verify.MarkerLabel+"=true")
	f.DurationVar(&cfg.RegisterTimeout, "register-timeout", time.Minute, "how long case 1 waits for the kubelet to register the driver once its pods run")
	f.StringVar(&cfg.RegistrarLogs, "registrar-logs", "keep", "keep, or blocked: every read of the registrar container's log through the API fails (no verdict may rest on it)")
	f.BoolVar(&cfg.LocalSockets, "local-node-sockets", false, "the node is this machine: ask the registration socket (GetInfo) and the driver (NodeGetInfo) directly, as the kubelet does")
	f.BoolVar(&cfg.Cleanup, "cleanup", false, "remove what earlier runs left (every object labelled "+verify.RunLabel+") and exit")
	f.StringVar(&kubectlPath, "kubectl", "kubectl", "kubectl binary for kustomize, apply and delete")
	f.StringVar(&cfg.Workdir, "workdir", "", "directory for the manifests as applied (default: a temporary one, removed at the end)")
	f.StringArrayVar(&cfg.Cases, "case", nil, "run only this case besides 1_deployed and 7_uninstalled (repeatable): one of "+strings.Join(drivercases.Cases(), ", ")+"; default: 2 to 6, and R1-R5 (ready for rolling updates?) when the manifests turn it on ("+drivercases.CaseRolloutsWithFaults+" runs only when named)")
	f.StringVar(&cfg.ExpectFile, "expect", "", "a file of expected outcomes, one a line: <driver> <case> <verdict> <text its finding contains> (or <driver> "+report.LeftOnTheNode+" <count>); exit 0 when the outcomes are exactly these and every other case passed (a non-compliant example's own failures)")
	f.BoolVar(&cfg.RemoveLeft, "remove-left", false, "once a driver's cases ran, remove the mounts and volume directories it left on the nodes (still reported, exit not 0 without --expect)")
	f.IntVar(&cfg.Rollouts, "rollouts", 10, "how many rollouts case "+drivercases.CaseRolloutsWithFaults+" makes, each with a fault of cases 2-5 at random")
	f.DurationVar(&cfg.Timeout, "timeout", 30*time.Minute, "the whole run's deadline; the node pods end by themselves after it")
	return cmd
}

// kubectlRunner runs kubectl with the same kubeconfig, context and
// namespace flags as the plugin got.
func kubectlRunner(path string, config *genericclioptions.ConfigFlags) func(ctx context.Context, args ...string) (string, error) {
	var global []string
	for flag, v := range map[string]*string{"--kubeconfig": config.KubeConfig, "--context": config.Context, "--cluster": config.ClusterName, "--user": config.AuthInfoName} {
		if v != nil && *v != "" {
			global = append(global, flag+"="+*v)
		}
	}
	return func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, path, append(append([]string(nil), global...), args...)...)
		cmd.Env = os.Environ()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		}
		return out.String(), nil
	}
}
