//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	corev1 "k8s.io/api/core/v1"
)

// NodeShell is a Provider that runs a shell script on a node (sh -c script
// sh args...) and returns its standard output: the local node (this host)
// and kind (inside the node's container) alike, so that one script serves
// both.
type NodeShell interface {
	NodeSh(ctx context.Context, node, script string, args ...string) (string, error)
}

func (p *localProvider) NodeSh(ctx context.Context, node, script string, args ...string) (string, error) {
	if err := p.checkNode(node); err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("on %s: sh: %w: %s", node, err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

func (k *kindProvider) NodeSh(ctx context.Context, node, script string, args ...string) (string, error) {
	n, err := k.node(node)
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	if err := n.CommandContext(ctx, "sh", append([]string{"-c", script, "sh"}, args...)...).SetStdout(&out).SetStderr(&errOut).Run(); err != nil {
		return out.String(), fmt.Errorf("on %s: sh: %w: %s", node, err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// SocketOwner finds the container of pod whose process listens on the unix
// socket at path on the pod's node (drivercases.SocketOwner).
func (c *Cluster) SocketOwner(ctx context.Context, pod *corev1.Pod, path string) (string, error) {
	sh, ok := c.Provider.(drivercases.Node)
	if !ok {
		return "", fmt.Errorf("provider %s cannot run commands on a node: the container listening on %s cannot be found", c.Provider.Name(), path)
	}
	return drivercases.SocketOwner(ctx, sh, pod, path)
}
