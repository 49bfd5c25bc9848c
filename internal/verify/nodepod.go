package verify

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

// KubeletHealthz is the kubelet's default healthz address, asked on the
// node.
const KubeletHealthz = "http://127.0.0.1:10248/healthz"

// kubeletHealthzScript GETs $1 with the node's curl, else its wget.
const kubeletHealthzScript = `if command -v curl >/dev/null; then exec curl -sf --max-time 2 "$1"; fi
if command -v wget >/dev/null; then exec wget -q -T 2 -O - "$1"; fi
echo "neither curl nor wget on the node: cannot ask the kubelet's $1" >&2; exit 3`

// The node scripts run by the node pod's own shell (busybox is enough).
var (
	//go:embed nodescripts/restart-kubelet.sh
	restartKubeletScript string
	//go:embed nodescripts/kubelet-pid.sh
	kubeletPIDScript string
	//go:embed nodescripts/kubelet-log.sh
	kubeletLogScript string
	//go:embed nodescripts/kill-container.sh
	killContainerScript string
)

// nodePods does the node-level actions of the cases through a short-lived
// privileged pod on each node it acts on (hostPID, the host's network, the
// host's root at /host), created on first use in the run's namespace and
// removed by Close. It is the cases' drivercases.Node.
type nodePods struct {
	client    kubernetes.Interface
	config    *rest.Config
	namespace string
	image     string
	labels    map[string]string
	deadline  time.Duration // activeDeadlineSeconds: the pod ends by itself
	track     *tracker

	mu   sync.Mutex
	pods map[string]string // node -> pod name
}

const nodePodContainer = "node"

// nodePodSpec is the pod that acts on node.
func (n *nodePods) nodePodSpec(node string) *corev1.Pod {
	privileged := true
	deadline := int64(n.deadline.Seconds())
	grace := int64(0)
	automount := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csi-registrar-verify-node-", Namespace: n.namespace, Labels: n.labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostPID:                       true,
			HostNetwork:                   true,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &automount,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            nodePodContainer,
				Image:           n.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", fmt.Sprint(deadline)},
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}},
			}},
			Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	}
}

// pod returns the running node pod on node, creating it on first use.
func (n *nodePods) pod(ctx context.Context, node string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.pods[node]; ok {
		return name, nil
	}
	p, err := n.client.CoreV1().Pods(n.namespace).Create(ctx, n.nodePodSpec(node), metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create the node pod on %s in namespace %s: %w (it needs create pods there and the Pod Security level privileged)", node, n.namespace, err)
	}
	n.track.add(kindPod, n.namespace, p.Name)
	n.pods[node] = p.Name
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := n.client.CoreV1().Pods(n.namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cur.Status.Phase == corev1.PodRunning {
			return true, nil
		}
		last = fmt.Sprintf("phase %s", cur.Status.Phase)
		for _, s := range cur.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil {
				last += fmt.Sprintf("; %s: %s", w.Reason, w.Message)
				if w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "ErrImageNeverPull" {
					return false, fmt.Errorf("image %s cannot be pulled on node %s (%s): pass --node-image with an image the node has or can pull (offline: load an archive of one into the node first)", n.image, node, w.Message)
				}
			}
		}
		if cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("node pod %s/%s ended: %s", n.namespace, p.Name, last)
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("node pod %s/%s on %s not running: %w (%s)", n.namespace, p.Name, node, err, last)
	}
	return p.Name, nil
}

// exec runs argv in the node pod on node and returns its standard output.
func (n *nodePods) exec(ctx context.Context, node string, argv ...string) (string, error) {
	name, err := n.pod(ctx, node)
	if err != nil {
		return "", &drivercases.VerifyError{Err: err}
	}
	out, err := n.ExecIn(ctx, n.namespace, name, nodePodContainer, argv...)
	if err != nil {
		return out, fmt.Errorf("on node %s: %w", node, err)
	}
	return out, nil
}

// ExecIn runs argv in a container of a pod (the API's exec) and returns its
// standard output. An error that is not the command's exit status is
// verify's own (drivercases.VerifyError).
func (n *nodePods) ExecIn(ctx context.Context, namespace, name, container string, argv ...string) (string, error) {
	req := n.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(n.config, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(n.config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		return out.String(), execError(fmt.Errorf("pod %s/%s, container %s: %w: %s", namespace, name, container, err, strings.TrimSpace(errOut.String())))
	}
	return out.String(), nil
}

// execError classifies an exec's error: the command's exit status is the
// node's answer; anything else (the API server, the kubelet's stream) is
// verify's own trouble, a drivercases.VerifyError.
func execError(err error) error {
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return err
	}
	return &drivercases.VerifyError{Err: err}
}

// hostPath is the PATH of commands run in the host's root.
const hostPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostSh runs `sh -c script sh args...` in the host's root (chroot /host):
// the node's own shell and tools, its files at their paths. The shell is
// named by its path: busybox's chroot would run its own sh for "sh".
func (n *nodePods) hostSh(ctx context.Context, node, script string, args ...string) (string, error) {
	return n.exec(ctx, node, append([]string{"chroot", "/host", "/usr/bin/env", hostPath, "/bin/sh", "-c", script, "sh"}, args...)...)
}

// podSh runs a script with the node pod's own shell.
func (n *nodePods) podSh(ctx context.Context, node, script string, args ...string) (string, error) {
	return n.exec(ctx, node, append([]string{"sh", "-c", script, "sh"}, args...)...)
}

func (n *nodePods) NodeSh(ctx context.Context, node, script string, args ...string) (string, error) {
	return n.hostSh(ctx, node, script, args...)
}

func (n *nodePods) RemoveFile(ctx context.Context, node, path string) error {
	_, err := n.hostSh(ctx, node, `rm -f -- "$1"`, path)
	return err
}

func (n *nodePods) PluginsRegistry(ctx context.Context, node string) ([]drivercases.NodeFile, error) {
	out, err := n.hostSh(ctx, node, drivercases.ListingScript, drivercases.PluginsRegistry)
	if err != nil {
		return nil, err
	}
	return drivercases.ParseListing(out)
}

func (n *nodePods) KillContainer(ctx context.Context, node, id string) error {
	_, err := n.podSh(ctx, node, killContainerScript, id)
	return err
}

func (n *nodePods) KubeletLog(ctx context.Context, node string, lines int) (string, error) {
	return n.podSh(ctx, node, kubeletLogScript, fmt.Sprint(lines))
}

// RestartKubelet has the kubelet restarted (systemd, or the supervisor that
// runs it) and waits until a kubelet process other than the old one runs
// and answers its health check (KubeletHealthz, on the node). The node pod's exec goes through the kubelet: while
// none runs, the calls fail and are tried again.
func (n *nodePods) RestartKubelet(ctx context.Context, node string) error {
	out, err := n.podSh(ctx, node, restartKubeletScript)
	if err != nil {
		return fmt.Errorf("restart the kubelet: %w", err)
	}
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != "restarting" {
		return fmt.Errorf("restart the kubelet on %s: unexpected answer %q", node, out)
	}
	old := f[1]
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, false, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		pid, err := n.podSh(cctx, node, kubeletPIDScript)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if pid = strings.TrimSpace(pid); pid == old || pid == "none" {
			last = "kubelet process: " + pid
			return false, nil
		}
		// Its healthz on the node (the pod is in the host's network), with
		// the node's own curl or wget.
		body, err := n.hostSh(cctx, node, kubeletHealthzScript, KubeletHealthz)
		last = fmt.Sprintf("kubelet pid %s, %s: %q %v", pid, KubeletHealthz, body, err)
		return err == nil && strings.TrimSpace(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("the kubelet on %s (pid %s, restarted by %s) has no healthy successor after 2 min: %w (last: %s)", node, old, f[2], err, last)
	}
	return nil
}

// Close deletes the node pods it made.
func (n *nodePods) Close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for node, name := range n.pods {
		err := n.client.CoreV1().Pods(n.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete node pod %s/%s on %s: %w", n.namespace, name, node, err))
			continue
		}
		n.track.remove(kindPod, n.namespace, name)
		delete(n.pods, node)
	}
	return errors.Join(errs...)
}
