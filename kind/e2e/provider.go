//go:build e2e

// Package e2e is csi-registrar's end-to-end suite (build tag e2e). It talks to
// any cluster through client-go on $KUBECONFIG; the few node-level actions the
// API cannot do (restart the kubelet, remove a file, kill a container, read
// plugins_registry and the kubelet log) go through a Provider: the local node
// (kind/localnode) or kind (sigs.k8s.io/kind's Go API).
//
// The exported helpers (Provider, Cluster, Recorder, ParseMetrics) are meant to
// be reused by other suites of this repository built with the e2e tag.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

// KubeletRoot is the kubelet's root directory on the nodes of both providers.
const KubeletRoot = drivercases.KubeletRoot

// PluginsRegistry is the directory the kubelet's plugin watcher watches.
const PluginsRegistry = drivercases.PluginsRegistry

// NodeFile is one entry of a directory on a node (drivercases' type: the
// providers serve the driver cases as their Node).
type NodeFile = drivercases.NodeFile

// Provider runs the node-level actions of the suite (drivercases.Node), and
// brings the cluster up and down. Node names are Kubernetes node names.
type Provider interface {
	// Name is "local" or "kind".
	Name() string
	// Up brings the cluster up if it is not up yet. It reports whether it
	// had to start (or create) it.
	Up(ctx context.Context) (started bool, err error)
	// Down stops (local) or deletes (kind) the cluster.
	Down(ctx context.Context) error
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig() string
	// Kubectl is the kubectl binary to run `apply -k` and `delete -k` with.
	Kubectl() string
	// LoadImage makes the image archive (docker-archive or OCI tarball)
	// available to the container runtime of every node.
	LoadImage(ctx context.Context, archive string) error
	// Node: the node-level actions, as the driver cases (verify) use them:
	// the one interface for both.
	drivercases.Node
}

// NewProvider returns the provider called name ("local" or "kind") for the
// repository at repoRoot.
func NewProvider(name, repoRoot string) (Provider, error) {
	switch name {
	case "", "local":
		return newLocalProvider(repoRoot)
	case "kind":
		return newKindProvider(repoRoot)
	}
	return nil, fmt.Errorf("unknown E2E_PROVIDER %q: use local or kind", name)
}

// RepoRoot finds the repository root: $E2E_REPO_ROOT, or the closest parent
// directory of the working directory that holds go.mod.
func RepoRoot() (string, error) {
	if r := os.Getenv("E2E_REPO_ROOT"); r != "" {
		return filepath.Abs(r)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: set E2E_REPO_ROOT")
		}
		dir = parent
	}
}

// parseListing parses a listing of drivercases.ListingScript.
func parseListing(out string) ([]NodeFile, error) { return drivercases.ParseListing(out) }
