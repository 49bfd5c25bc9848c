package drivercases

import (
	"context"
	"fmt"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/sockowner"
	corev1 "k8s.io/api/core/v1"
)

// SocketOwner finds the container of pod whose process listens on the unix
// socket at path on the pod's node (package sockowner). The error names
// what was tried.
func SocketOwner(ctx context.Context, n Node, pod *corev1.Pod, path string) (string, error) {
	node := pod.Spec.NodeName
	out, err := n.NodeSh(ctx, node, sockowner.Script, path)
	if err != nil {
		return "", fmt.Errorf("socket owner search for %s: %w", path, err)
	}
	f, err := sockowner.Parse(node, path, out)
	if err != nil {
		return "", err
	}
	ids := map[string]string{}
	for _, s := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if id := ContainerID(s); id != "" && s.State.Running != nil {
			ids[s.Name] = id
		}
	}
	return f.Container(pod.Namespace+"/"+pod.Name, ids)
}
