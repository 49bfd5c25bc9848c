//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"
)

// kindProvider drives a kind cluster: kind/cluster/cluster.sh creates and deletes it
// (the one owner of its lifecycle); node commands run in the node containers
// through sigs.k8s.io/kind's Go API (as `kind`'s own node API does, through
// the container runtime).
type kindProvider struct {
	root       string
	name       string // cluster name: $KIND_CLUSTER, default csi-registrar
	kubeconfig string // bin/kind.kubeconfig (as kind/lib.sh)
	kubectl    string
	p          *cluster.Provider
}

func newKindProvider(root string) (*kindProvider, error) {
	opt, err := cluster.DetectNodeProvider()
	if err != nil {
		return nil, fmt.Errorf("kind: %w", err)
	}
	if opt == nil {
		return nil, fmt.Errorf("kind: no container runtime found (docker, podman or nerdctl)")
	}
	k := &kindProvider{
		root:       root,
		name:       os.Getenv("KIND_CLUSTER"),
		kubeconfig: filepath.Join(root, "bin", "kind.kubeconfig"),
		p:          cluster.NewProvider(opt, cluster.ProviderWithLogger(kindcmd.NewLogger())),
	}
	if k.name == "" {
		k.name = "csi-registrar"
	}
	k.kubectl, err = findKubectl(root)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// findKubectl: $KUBECTL, kubectl on the PATH, or the one kind/localnode built.
func findKubectl(root string) (string, error) {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k, nil
	}
	if k, err := exec.LookPath("kubectl"); err == nil {
		return k, nil
	}
	if l, err := newLocalProvider(root); err == nil {
		if _, err := os.Stat(l.kubectl); err == nil {
			return l.kubectl, nil
		}
	}
	return "", fmt.Errorf("no kubectl: set KUBECTL, put kubectl on the PATH, or build one with `make local-build`")
}

func (k *kindProvider) Name() string       { return "kind" }
func (k *kindProvider) Kubeconfig() string { return k.kubeconfig }
func (k *kindProvider) Kubectl() string    { return k.kubectl }

// Up and Down leave the cluster's lifecycle to its one owner,
// kind/cluster/cluster.sh (the private dockerd, the node image built here, the
// static pod network, the host state restored at the end): Up runs
// `cluster.sh up` when the cluster does not exist yet, then exports its
// kubeconfig.
func (k *kindProvider) Up(ctx context.Context) (bool, error) {
	clusters, err := k.p.List()
	if err != nil {
		return false, fmt.Errorf("kind: list clusters: %w", err)
	}
	started := false
	if !slices.Contains(clusters, k.name) {
		if err := k.clusterSh(ctx, "up"); err != nil {
			return false, err
		}
		started = true
	}
	if err := os.MkdirAll(filepath.Dir(k.kubeconfig), 0o755); err != nil {
		return started, err
	}
	if err := k.p.ExportKubeConfig(k.name, k.kubeconfig, false); err != nil {
		return started, fmt.Errorf("kind: export kubeconfig: %w", err)
	}
	return started, nil
}

// Down runs `kind/cluster/cluster.sh down`: the cluster and everything it brought.
func (k *kindProvider) Down(ctx context.Context) error { return k.clusterSh(ctx, "down") }

func (k *kindProvider) clusterSh(ctx context.Context, verb string) error {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(k.root, "kind", "cluster.sh"), verb)
	cmd.Dir = k.root
	cmd.Env = append(os.Environ(), "KIND_CLUSTER="+k.name)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kind/cluster/cluster.sh %s: %w", verb, err)
	}
	return nil
}

// LoadImage imports the archive on every node, as `kind load image-archive`.
func (k *kindProvider) LoadImage(_ context.Context, archive string) error {
	ns, err := k.p.ListInternalNodes(k.name)
	if err != nil {
		return err
	}
	for _, n := range ns {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		err = nodeutils.LoadImageArchive(n, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("kind: load %s on %s: %w", archive, n, err)
		}
	}
	return nil
}

func (k *kindProvider) node(name string) (nodes.Node, error) {
	ns, err := k.p.ListInternalNodes(k.name)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		if n.String() == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("kind: cluster %s has no node %q", k.name, name)
}

// sh is NodeSh for the provider's own short scripts; its error quotes the script.
func (k *kindProvider) sh(ctx context.Context, node, script string) (string, error) {
	out, err := k.NodeSh(ctx, node, script)
	if err != nil {
		err = fmt.Errorf("%q: %w", script, err)
	}
	return out, err
}

func (k *kindProvider) RestartKubelet(ctx context.Context, node string) error {
	_, err := k.sh(ctx, node, `systemctl restart kubelet &&
for i in $(seq 1 300); do curl -sf http://127.0.0.1:10248/healthz >/dev/null && exit 0; sleep 0.2; done
echo "kubelet not healthy 60s after the restart" >&2; exit 1`)
	return err
}

func (k *kindProvider) RemoveFile(ctx context.Context, node, path string) error {
	_, err := k.sh(ctx, node, "rm -f -- "+shellQuote(path))
	return err
}

func (k *kindProvider) PluginsRegistry(ctx context.Context, node string) ([]NodeFile, error) {
	out, err := k.sh(ctx, node, "find "+PluginsRegistry+` -mindepth 1 -maxdepth 1 -printf '%y %D %i %C@ %f\n'`)
	if err != nil {
		return nil, err
	}
	return parseListing(out)
}

func (k *kindProvider) KillContainer(ctx context.Context, node, id string) error {
	// ctr, not crictl: both node images have it (the one built here has no crictl),
	// and a CRI container ID is the containerd container ID.
	_, err := k.sh(ctx, node, "ctr --namespace k8s.io tasks kill --signal SIGKILL "+shellQuote(id))
	return err
}

func (k *kindProvider) KubeletLog(ctx context.Context, node string, lines int) (string, error) {
	return k.sh(ctx, node, fmt.Sprintf("journalctl -u kubelet --no-pager -n %d", lines))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
