//go:build e2e || bench

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
)

// localEnv is what kind/localnode/env.sh, the single source of truth for the
// local node's paths, says: read once by readLocalEnv and carried.
type localEnv struct {
	kubeconfig string
	kubectl    string
	node       string // NODE_NAME
	containerd string // CONTAINERD_ADDRESS, the containerd socket
	cache      string // LOCALNODE_CACHE: logs/ lives there
}

// readLocalEnv sources env.sh of the local node's scripts directory (with the
// caller's K8S) and reads its variables, NUL-separated, so that no value is
// parsed back from shell quoting.
func readLocalEnv(scripts string) (localEnv, error) {
	out, err := exec.Command("bash", "-c", `source "$1/env.sh" && printf '%s\0' "$KUBECONFIG" "$KUBECTL" "$NODE_NAME" "$CONTAINERD_ADDRESS" "$LOCALNODE_CACHE"`,
		"env", scripts).Output()
	if err != nil {
		return localEnv{}, fmt.Errorf("kind/localnode/env.sh: %w", err)
	}
	v := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(v) != 5 || v[1] == "" || v[2] == "" {
		return localEnv{}, fmt.Errorf("kind/localnode/env.sh printed %q, want KUBECONFIG, KUBECTL, NODE_NAME, CONTAINERD_ADDRESS and LOCALNODE_CACHE", out)
	}
	return localEnv{kubeconfig: v[0], kubectl: v[1], node: v[2], containerd: v[3], cache: v[4]}, nil
}
