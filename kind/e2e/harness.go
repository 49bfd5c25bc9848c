//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is the suite's handle on the cluster under test: client-go on the
// provider's kubeconfig, kubectl for kustomizations, and the provider for
// node-level actions. Namespace and DaemonSet name the deployment of manifests/.
type Cluster struct {
	Provider  Provider
	Client    kubernetes.Interface
	RepoRoot  string
	Namespace string
	DaemonSet string
	// Selector selects the DaemonSet's pods.
	Selector string
	// MetricsPort is the registrar's --http-endpoint port (/readyz, /metrics).
	MetricsPort string
}

// NewCluster connects to the provider's cluster. The deployment names are
// those of manifests/.
func NewCluster(p Provider, repoRoot string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", p.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{
		Provider:    p,
		Client:      cs,
		RepoRoot:    repoRoot,
		Namespace:   "csi-registrar",
		DaemonSet:   "csi-stub-node",
		Selector:    "app.kubernetes.io/name=csi-stub-node",
		MetricsPort: "9809",
	}, nil
}

// Kubectl runs the provider's kubectl on the cluster from the repository root
// and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Provider.Kubectl(), args...)
	cmd.Dir = c.RepoRoot
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Provider.Kubeconfig())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Apply applies a kustomization (a directory relative to the repository root).
func (c *Cluster) Apply(ctx context.Context, dir string) error {
	_, err := c.Kubectl(ctx, "apply", "-k", dir)
	return err
}

// Delete deletes what a kustomization created and waits until it is gone.
func (c *Cluster) Delete(ctx context.Context, dir string) error {
	_, err := c.Kubectl(ctx, "delete", "-k", dir, "--ignore-not-found", "--wait=true", "--timeout=180s")
	return err
}

// DriverConfig is what the DaemonSet configures the driver to report, read
// from its `driver` container's args and env.
type DriverConfig struct {
	Driver string
	// NodeIDIsNodeName: --node-id=$(VAR) with VAR from spec.nodeName.
	NodeIDIsNodeName bool
	MaxVolumes       int64
	Topology         map[string]string
	// RegistrationRetryMax is the registrar's --registration-retry-max (0: unset).
	RegistrationRetryMax time.Duration

	anyValues bool // RolledOut: any one entry will do
}

// TopologyKeys are the configured topology keys, sorted as the kubelet sorts them.
func (d DriverConfig) TopologyKeys() []string {
	var keys []string
	for k := range d.Topology {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RenderDaemonSet renders a kustomization with `kubectl kustomize` and
// returns its DaemonSet (driverspec.DaemonSetIn, as verify reads manifests).
func (c *Cluster) RenderDaemonSet(ctx context.Context, dir string) (*appsv1.DaemonSet, error) {
	out, err := c.Kubectl(ctx, "kustomize", dir)
	if err != nil {
		return nil, err
	}
	ds, err := driverspec.DaemonSetIn([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return ds, nil
}

// ConfigOf reads the DriverConfig from a DaemonSet.
func ConfigOf(ds *appsv1.DaemonSet) (DriverConfig, error) {
	d := DriverConfig{Topology: map[string]string{}}
	var drv, reg *corev1.Container
	for i := range ds.Spec.Template.Spec.Containers {
		switch ct := &ds.Spec.Template.Spec.Containers[i]; ct.Name {
		case "driver":
			drv = ct
		case "registrar":
			reg = ct
		}
	}
	if drv == nil || reg == nil {
		return d, fmt.Errorf("DaemonSet %s has no driver or registrar container", ds.Name)
	}
	fieldOf := map[string]string{}
	for _, e := range drv.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldOf[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for _, a := range drv.Args {
		k, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch k {
		case "driver-name":
			d.Driver = v
		case "node-id":
			if strings.HasPrefix(v, "$(") && strings.HasSuffix(v, ")") {
				d.NodeIDIsNodeName = fieldOf[v[2:len(v)-1]] == "spec.nodeName"
			}
		case "max-volumes-per-node":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return d, fmt.Errorf("driver arg %q: %w", a, err)
			}
			d.MaxVolumes = n
		case "topology":
			tk, tv, ok := strings.Cut(v, "=")
			if !ok {
				return d, fmt.Errorf("driver arg %q: want key=value", a)
			}
			d.Topology[tk] = tv
		}
	}
	for _, a := range reg.Args {
		if v, ok := strings.CutPrefix(a, "--registration-retry-max="); ok {
			dur, err := time.ParseDuration(v)
			if err != nil {
				return d, fmt.Errorf("registrar arg %q: %w", a, err)
			}
			d.RegistrationRetryMax = dur
		}
	}
	if d.Driver == "" {
		return d, fmt.Errorf("DaemonSet %s: the driver container has no --driver-name", ds.Name)
	}
	return d, nil
}

// NodeNames returns the names of the cluster's nodes, sorted.
func (c *Cluster) NodeNames(ctx context.Context) ([]string, error) {
	return drivercases.NodeNames(ctx, c.Client)
}

// Pods returns the DaemonSet's pods that are bound to a node and not
// terminating, by node name (drivercases.PodsByNode: two on one node are a
// *drivercases.DuplicatePodsError).
func (c *Cluster) Pods(ctx context.Context) (map[string]*corev1.Pod, error) {
	return drivercases.PodsByNode(ctx, c.Client, c.Namespace, c.Selector, "DaemonSet "+c.DaemonSet)
}

// PodOn returns the DaemonSet's pod on node.
func (c *Cluster) PodOn(ctx context.Context, node string) (*corev1.Pod, error) {
	return drivercases.PodOn(ctx, c.Client, c.Namespace, c.Selector, "DaemonSet "+c.DaemonSet, node)
}

// Restarts is "driver=N registrar=M" for a pod: the containers' restartCounts.
func Restarts(p *corev1.Pod) map[string]int32 {
	r := map[string]int32{}
	for _, s := range p.Status.ContainerStatuses {
		r[s.Name] = s.RestartCount
	}
	return r
}

// Registration is what the kubelet wrote for a driver on a node
// (drivercases': judged by csiplugin's rule).
type Registration = drivercases.Registration

// Registered reads what the kubelet wrote for the driver on node.
func (c *Cluster) Registered(ctx context.Context, node, driver string) (Registration, error) {
	return drivercases.ReadRegistration(ctx, c.Client, node, driver)
}

// EntryProblems compares a node's CSINode entries for the driver with what
// cfg configures; nil means exactly one entry, as configured.
func EntryProblems(entries []storagev1.CSINodeDriver, node string, cfg DriverConfig) []string {
	if len(entries) != 1 {
		return []string{fmt.Sprintf("CSINode %s has %d entries for %s, want 1", node, len(entries), cfg.Driver)}
	}
	e := entries[0]
	var p []string
	if cfg.NodeIDIsNodeName && e.NodeID != node {
		p = append(p, fmt.Sprintf("CSINode %s: nodeID %q, want the node name", node, e.NodeID))
	}
	if want := cfg.TopologyKeys(); !slices.Equal(e.TopologyKeys, want) {
		p = append(p, fmt.Sprintf("CSINode %s: topologyKeys %q, want %q", node, e.TopologyKeys, want))
	}
	switch {
	case cfg.MaxVolumes > 0 && (e.Allocatable == nil || e.Allocatable.Count == nil):
		p = append(p, fmt.Sprintf("CSINode %s: no allocatable count, want %d", node, cfg.MaxVolumes))
	case cfg.MaxVolumes > 0 && int64(*e.Allocatable.Count) != cfg.MaxVolumes:
		p = append(p, fmt.Sprintf("CSINode %s: allocatable count %d, want %d", node, *e.Allocatable.Count, cfg.MaxVolumes))
	case cfg.MaxVolumes == 0 && e.Allocatable != nil && e.Allocatable.Count != nil:
		p = append(p, fmt.Sprintf("CSINode %s: allocatable count %d, want none", node, *e.Allocatable.Count))
	}
	return p
}

// RegistrationProblems lists every way the registration on node differs
// from cfg: the annotation maps the driver to the node name, the CSINode
// has one entry as configured, the node carries the topology labels, and
// csiplugin's rule holds. Nil means registered.
func RegistrationProblems(r Registration, node string, cfg DriverConfig) []string {
	var p []string
	switch {
	case !r.Annotated:
		p = append(p, fmt.Sprintf("node %s: annotation %s has no key %s", node, csiplugin.NodeIDAnnotation, cfg.Driver))
	case cfg.NodeIDIsNodeName && r.Annotation != node:
		p = append(p, fmt.Sprintf("node %s: annotation maps %s to %q, want the node name", node, cfg.Driver, r.Annotation))
	}
	p = append(p, EntryProblems(r.Entries, node, cfg)...)
	if len(r.Entries) == 1 && r.Annotated && !r.Registered() {
		p = append(p, fmt.Sprintf("node %s: %s: %s", node, cfg.Driver, r.Problem()))
	}
	for k, v := range cfg.Topology {
		if got, ok := r.Labels[k]; !ok || got != v {
			p = append(p, fmt.Sprintf("node %s: label %s=%q (present: %v), want %q", node, k, got, ok, v))
		}
	}
	return p
}

// RolledOut waits until the DaemonSet is rolled out, every pod is Ready and
// every node has one CSINode entry for the driver, whatever its values (the
// cases check those).
func (c *Cluster) RolledOut(ctx context.Context, driver string, timeout time.Duration) error {
	return c.WaitDeployed(ctx, DriverConfig{Driver: driver, anyValues: true}, timeout)
}

// RolloutProblems lists why the DaemonSet is not fully rolled out and
// registered: rolled out by the one rule (drivercases.
// DaemonSetRolloutProblems: every node runs one pod of the current
// revision, Ready, which holds after a rollout undo), and the kubelet
// registered the driver on the node of each Ready pod as cfg says. Nil
// means deployed.
func (c *Cluster) RolloutProblems(ctx context.Context, cfg DriverConfig) ([]string, error) {
	p, pods, err := drivercases.DaemonSetRollout(ctx, c.Client, c.Namespace, c.DaemonSet, c.Selector)
	if err != nil {
		return nil, err
	}
	for node, pod := range pods {
		if !drivercases.PodReady(pod) {
			continue
		}
		r, err := c.Registered(ctx, node, cfg.Driver)
		if err != nil {
			return nil, err
		}
		if cfg.anyValues {
			if len(r.Entries) != 1 {
				p = append(p, fmt.Sprintf("CSINode %s has %d entries for %s, want 1", node, len(r.Entries), cfg.Driver))
			} else if !r.Registered() {
				p = append(p, fmt.Sprintf("node %s: %s: %s", node, cfg.Driver, r.Problem()))
			}
			continue
		}
		p = append(p, RegistrationProblems(r, node, cfg)...)
	}
	sort.Strings(p)
	return p, nil
}

// WaitDeployed waits until RolloutProblems is empty. It polls (every 250 ms):
// it waits for a steady state, it does not look for short-lived ones.
func (c *Cluster) WaitDeployed(ctx context.Context, cfg DriverConfig, timeout time.Duration) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.RolloutProblems(ctx, cfg)
		if err != nil {
			if apierrors.IsNotFound(err) {
				last = []string{err.Error()}
				return false, nil
			}
			return false, err
		}
		last = p
		return len(p) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("not deployed after %s: %w: %s", timeout, err, strings.Join(last, "; "))
	}
	return nil
}

// Proxy GETs path on the registrar's HTTP endpoint of pod through the API
// server's pod proxy, so every provider reads it the same way. It returns
// the HTTP status and body; a non-2xx status is not an error.
func (c *Cluster) Proxy(ctx context.Context, pod, path string) (int, string, error) {
	body, err := c.Client.CoreV1().Pods(c.Namespace).ProxyGet("http", pod, c.MetricsPort, path, nil).DoRaw(ctx)
	if err == nil {
		return 200, string(body), nil
	}
	// A non-2xx answer comes back as an API status error, with the body of
	// the answer: a 503 from /readyz is an answer, not a failure to ask.
	// (When the API server cannot reach the pod it answers itself, with its
	// own message in the body.)
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Code != 0 {
		if len(body) == 0 {
			body = []byte(se.Status().Message)
		}
		return int(se.Status().Code), string(body), nil
	}
	return 0, "", fmt.Errorf("GET %s on pod %s through the API server: %w", path, pod, err)
}

// Readyz returns the registrar's /readyz status and body.
func (c *Cluster) Readyz(ctx context.Context, pod string) (int, string, error) {
	return c.Proxy(ctx, pod, "/readyz")
}

// Metrics reads the registrar's /metrics of pod.
func (c *Cluster) Metrics(ctx context.Context, pod string) (Metrics, error) {
	code, body, err := c.Proxy(ctx, pod, "/metrics")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/metrics of pod %s: HTTP %d: %s", pod, code, body)
	}
	return ParseMetrics(body)
}

// Diagnostics collects what a failure needs to be understood: for each of
// nodes, its kubelet's log tail, plugins_registry, Node and CSINode; every
// pod of the namespace with its logs; the events (drivercases.Diagnostics).
func (c *Cluster) Diagnostics(ctx context.Context, nodes []string) string {
	return drivercases.Diagnostics(ctx, c.Client, c.Provider, c.Namespace, "", nodes)
}
