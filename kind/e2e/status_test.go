//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/clusterstatus"
	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestStatus runs `kubectl csi-registrar status` (cmd/kubectl-csi_registrar,
// the real binary) against the deployment of plainDir: each case starts
// from it deployed and registered everywhere and leaves it so.
//
//	E2E_STATUS_PLUGIN  the plugin binary to run (default: built from the tree)
//	E2E_UPSTREAM_REGISTRAR_ARCHIVE  an image archive of upstream's
//	  node-driver-registrar (registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0),
//	  built by hand: the upstream_registrar case runs only with it (never in CI,
//	  where nothing may build upstream)
func TestStatus(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"healthy", testStatusHealthy},
		{"kubelet_rejects", testStatusRejected},
		{"pod_deleted", testStatusPodDeleted},
		{"not_expected", testStatusNotExpected},
		{"stale_entry", testStatusStale},
		{"no_node_plugin", testStatusNoNodePlugin},
		{"in_process", testStatusInProcess},
		{"upstream_registrar", testStatusUpstream},
	} {
		t.Run(c.name, c.f)
	}
}

var (
	pluginOnce sync.Once
	pluginPath string
	pluginErr  error
)

// statusPlugin is the plugin binary: E2E_STATUS_PLUGIN, else built once.
func statusPlugin(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		if p := os.Getenv("E2E_STATUS_PLUGIN"); p != "" {
			pluginPath = p
			return
		}
		// Beside the suite's other build outputs (bin/e2e/, ignored by git),
		// replaced by the next run: a temporary directory per run would be
		// left behind with its 110 MB binary.
		dir := filepath.Join(cl.RepoRoot, "bin", "e2e")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			pluginErr = err
			return
		}
		pluginPath = filepath.Join(dir, "kubectl-csi_registrar")
		cmd := exec.Command("go", "build", "-o", pluginPath, "./cmd/kubectl-csi_registrar")
		cmd.Dir = cl.RepoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("go build ./cmd/kubectl-csi_registrar: %v\n%s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginPath
}

// statusRun is one run of the plugin.
type statusRun struct {
	code     int
	stdout   string
	stderr   string
	took     time.Duration
	report   *clusterstatus.Report // with -o json
	argsUsed []string
}

// kubeconfigFor returns a kubeconfig for a new ServiceAccount bound to the
// ClusterRoles of plainDir named roles only; all of it is removed at the
// end of the test.
func kubeconfigFor(t *testing.T, ctx context.Context, roles ...string) string {
	t.Helper()
	name := fmt.Sprintf("status-reader-%d", time.Now().UnixNano())
	sa, err := cl.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Client.CoreV1().ServiceAccounts("default").Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
	})
	for _, role := range roles {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: name}}}
		if _, err := cl.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cl.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		})
	}
	tok, err := cl.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(cl.Provider.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos = map[string]*clientcmdapi.AuthInfo{name: {Token: tok.Status.Token}}
	for _, c := range kc.Contexts {
		c.AuthInfo = name
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// runStatus runs `kubectl csi-registrar status ARGS` on the cluster.
func runStatus(t *testing.T, ctx context.Context, args ...string) statusRun {
	t.Helper()
	args = append([]string{"status", "--kubeconfig", cl.Provider.Kubeconfig()}, args...)
	cmd := exec.CommandContext(ctx, statusPlugin(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	t0 := time.Now()
	err := cmd.Run()
	r := statusRun{stdout: out.String(), stderr: errOut.String(), took: time.Since(t0), argsUsed: args}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl-csi_registrar %q: %v", args, err)
	}
	for i, a := range args {
		if a == "-o" && i+1 < len(args) && args[i+1] == "json" {
			r.report = &clusterstatus.Report{}
			if err := json.Unmarshal(out.Bytes(), r.report); err != nil {
				t.Fatalf("kubectl-csi_registrar %q: exit %d, output is not the JSON report: %v\n%s\nstderr: %s", args, r.code, err, out.String(), r.stderr)
			}
		}
	}
	return r
}

func (r statusRun) driver(name string) *clusterstatus.Driver {
	for i := range r.report.Drivers {
		if r.report.Drivers[i].Name == name {
			return &r.report.Drivers[i]
		}
	}
	return nil
}

func (r statusRun) node(driver, node string) *clusterstatus.Node {
	d := r.driver(driver)
	if d == nil {
		return nil
	}
	for i := range d.Nodes {
		if d.Nodes[i].Name == node {
			return &d.Nodes[i]
		}
	}
	return nil
}

func (r statusRun) String() string {
	return fmt.Sprintf("kubectl-csi_registrar %q: exit %d in %s\n%s%s", r.argsUsed, r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// awaitStatus runs the plugin until cond holds.
func awaitStatus(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(statusRun) bool, args ...string) statusRun {
	t.Helper()
	var last statusRun
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = runStatus(t, ctx, args...)
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("%s: not seen within %s; last run:\n%s", what, timeout, last)
	}
	return last
}

// Healthy after deploy: exit 0, every node expected and registered.
func testStatusHealthy(t *testing.T) {
	ctx, _ := begin(t)
	r := runStatus(t, ctx, "-o", "json", "--stats")
	d := r.driver(cfg.Driver)
	if r.code != clusterstatus.ExitHealthy || d == nil || d.Expected != len(allNodes) || d.Registered != len(allNodes) ||
		d.NotRegistered != 0 || d.Stale != 0 || !d.CSIDriverObject || d.Registrar != "csi-registrar" || d.Problem != "" || len(d.Warnings) != 0 {
		t.Fatalf("want exit 0 and %s registered on all %d nodes by csi-registrar:\n%s", cfg.Driver, len(allNodes), r)
	}
	measure(t, "kubectl csi-registrar status (deployed, -o json)", r.took)
	table := runStatus(t, ctx)
	t.Logf("kubectl csi-registrar status (%s, exit %d):\n%s%s", table.took.Round(time.Millisecond), table.code, table.stdout, r.stderr)
}

// The kubelet rejects the registration on one node (its topology label
// collides with the driver's): the plugin names the node and the
// kubelet's error, and exits 1.
func testStatusRejected(t *testing.T) {
	ctx, _ := begin(t)
	node := allNodes[len(allNodes)-1] // on kind a worker
	key := cfg.TopologyKeys()[0]
	collide := cfg.Topology[key] + "-collision"
	if err := setTopologyLabels(ctx, node, map[string]string{key: collide}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), podWait)
		defer cancel()
		if err := setTopologyLabels(ctx, node, nil); err != nil {
			t.Error(err)
		}
		// The registrar retries on its own; replacing the pod makes it prompt.
		if p, err := cl.PodOn(ctx, node); err == nil {
			_ = cl.Client.CoreV1().Pods(cl.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
	})
	pod := podOn(t, ctx, node)
	if err := cl.Client.CoreV1().Pods(cl.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := awaitStatus(t, ctx, podWait, node+" not registered with the kubelet's error", func(r statusRun) bool {
		n := r.node(cfg.Driver, node)
		return r.code == clusterstatus.ExitUnhealthy && n != nil && n.State == clusterstatus.StateNotRegistered &&
			strings.Contains(n.Reason, "kubelet rejected: ") && strings.Contains(n.Reason, "topology value collision")
	}, "-o", "json")
	t.Logf("%s: %s", node, r.node(cfg.Driver, node).Reason)
	if d := r.driver(cfg.Driver); d.NotRegistered != 1 || d.Registered != len(allNodes)-1 {
		t.Errorf("want exactly %s not registered:\n%s", node, r)
	}
	table := runStatus(t, ctx)
	wide := runStatus(t, ctx, "-o", "wide")
	if table.code != 1 || wide.code != 1 || !strings.Contains(wide.stdout, node) || !strings.Contains(wide.stdout, "kubelet rejected") {
		t.Errorf("table and wide: want exit 1 naming %s and the kubelet's error:\n%s\n%s", node, table, wide)
	}
	measure(t, "kubectl csi-registrar status (one node rejected)", table.took)

	// With the least ClusterRole only (no proxy): the failure is still seen
	// (exit 1), and the output names the permission that would tell why.
	least := kubeconfigFor(t, ctx, "csi-registrar-status")
	limited := runStatus(t, ctx, "--kubeconfig", least, "-o", "wide")
	if limited.code != 1 || !strings.Contains(limited.stdout, node) ||
		!strings.Contains(limited.stdout, "missing permission: get pods/proxy (cluster-wide)") {
		t.Errorf("as a user bound to csi-registrar-status only: want exit 1, %s not registered, and the missing permission get pods/proxy named:\n%s", node, limited)
	}
	both := kubeconfigFor(t, ctx, "csi-registrar-status", "csi-registrar-status-proxy")
	full := runStatus(t, ctx, "--kubeconfig", both, "-o", "wide")
	if full.code != 1 || !strings.Contains(full.stdout, "kubelet rejected") || strings.Contains(full.stdout, "missing permission") {
		t.Errorf("as a user bound to both ClusterRoles: want the kubelet's error and no missing permission:\n%s", full)
	}
	t.Logf("kubectl csi-registrar status (%s, exit %d):\n%s", table.took.Round(time.Millisecond), table.code, table.stdout)
	t.Logf("kubectl csi-registrar status -o wide (%s, exit %d):\n%s", wide.took.Round(time.Millisecond), wide.code, wide.stdout)
}

// A node whose pod was deleted shows as not registered, then registered,
// in the plugin's watch (-w -o json: a document per change).
func testStatusPodDeleted(t *testing.T) {
	ctx, _ := begin(t)
	node := allNodes[0]
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(wctx, statusPlugin(t), "status", cfg.Driver, "--kubeconfig", cl.Provider.Kubeconfig(), "-w", "-o", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	docs := make(chan clusterstatus.Report)
	go func() {
		defer close(docs)
		dec := json.NewDecoder(bufio.NewReader(stdout))
		for {
			var r clusterstatus.Report
			if err := dec.Decode(&r); err != nil {
				if !errors.Is(err, io.EOF) && wctx.Err() == nil {
					t.Errorf("watch output: %v", err)
				}
				return
			}
			select {
			case docs <- r:
			case <-wctx.Done():
				return
			}
		}
	}()
	state := func(r clusterstatus.Report) clusterstatus.Node {
		for _, d := range r.Drivers {
			for _, n := range d.Nodes {
				if d.Name == cfg.Driver && n.Name == node {
					return n
				}
			}
		}
		return clusterstatus.Node{}
	}
	next := func(what string, cond func(clusterstatus.Node) bool) clusterstatus.Node {
		t.Helper()
		timeout := time.After(podWait)
		for {
			select {
			case r, ok := <-docs:
				if !ok {
					t.Fatalf("%s: the watch ended: %s", what, stderr.String())
				}
				n := state(r)
				t.Logf("watch: %s %s %s %s", n.Name, n.State, n.Pod, n.Reason)
				if cond(n) {
					return n
				}
			case <-timeout:
				t.Fatalf("%s: not seen within %s", what, podWait)
			}
		}
	}
	first := next("registered at the start", func(n clusterstatus.Node) bool { return n.State == clusterstatus.StateRegistered })
	t0 := time.Now()
	if err := cl.Client.CoreV1().Pods(cl.Namespace).Delete(ctx, strings.TrimPrefix(first.Pod, cl.Namespace+"/"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next("not registered", func(n clusterstatus.Node) bool { return n.State == clusterstatus.StateNotRegistered })
	measure(t, "status -w: pod deleted → not registered", time.Since(t0))
	again := next("registered again, by the new pod", func(n clusterstatus.Node) bool {
		return n.State == clusterstatus.StateRegistered && n.Pod != first.Pod
	})
	measure(t, "status -w: pod deleted → registered again", time.Since(t0))
	t.Logf("%s: %s replaced by %s", node, first.Pod, again.Pod)
}

// A DaemonSet whose node affinity excludes one node: that node is "not
// expected", and the plugin exits 0.
func testStatusNotExpected(t *testing.T) {
	ctx, _ := begin(t)
	node := allNodes[len(allNodes)-1]
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"NotIn","values":[%q]}]}]}}}}}}}`, node)
	if _, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Patch(ctx, cl.DaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), podWait)
		defer cancel()
		if _, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Patch(ctx, cl.DaemonSet, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/spec/template/spec/affinity"}]`), metav1.PatchOptions{}); err != nil {
			t.Errorf("restoring the DaemonSet: %v", err)
		}
		// The template is the first one again: the DaemonSet controller takes
		// the pods it did not replace as current, the suite wants pods of the
		// latest generation. Replace them at once.
		if err := cl.Client.CoreV1().Pods(cl.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: cl.Selector}); err != nil {
			t.Errorf("replacing the pods: %v", err)
		}
		if err := cl.WaitDeployed(ctx, cfg, podWait); err != nil {
			t.Errorf(plainDir+" not registered again: %v", err)
		}
	})
	// The new template replaces the pods on the other nodes too: the rollout
	// ends first, else a later status sees one of them terminating. (On one
	// node there is nothing else to roll, and no node left to schedule on.)
	if len(allNodes) > 1 {
		if err := cl.RolledOut(ctx, cfg.Driver, 3*podWait); err != nil {
			t.Fatal(err)
		}
	}
	// With one node, the node plugin now runs on none: the driver is not
	// registered anywhere (exit 1, with the reason), the node still "not
	// expected". With more, the others stay registered (exit 0).
	wantCode, wantProblem := clusterstatus.ExitHealthy, false
	if len(allNodes) == 1 {
		wantCode, wantProblem = clusterstatus.ExitUnhealthy, true
	}
	r := awaitStatus(t, ctx, 3*podWait, node+" not expected, the others registered", func(r statusRun) bool {
		d, n := r.driver(cfg.Driver), r.node(cfg.Driver, node)
		return r.code == wantCode && d != nil && n != nil && n.State == clusterstatus.StateNotExpected &&
			d.Expected == len(allNodes)-1 && d.Registered == len(allNodes)-1 && (d.Problem != "") == wantProblem
	}, "-o", "json")
	wide := runStatus(t, ctx, "-o", "wide")
	if wide.code != wantCode || !strings.Contains(wide.stdout, "not expected") {
		t.Errorf("wide: want exit %d and %s not expected:\n%s", wantCode, node, wide)
	}
	t.Logf("%s", wide)
	_ = r
}

// A CSINode entry planted through the API for a driver without any node
// plugin pod is stale; the plugin exits 1.
func testStatusStale(t *testing.T) {
	ctx, _ := begin(t)
	node := allNodes[0]
	const stale = "stale.csi-registrar.example.com"
	cn, err := cl.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: stale, NodeID: node})
	if _, err := cl.Client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clearRegistration(context.Background(), node, stale); err != nil {
			t.Errorf("removing the planted entry: %v", err)
		}
	})
	r := runStatus(t, ctx, "-o", "json")
	d, n := r.driver(stale), r.node(stale, node)
	if r.code != clusterstatus.ExitUnhealthy || d == nil || d.Stale != 1 || n == nil || n.State != clusterstatus.StateStale {
		t.Fatalf("want exit 1 and %s stale on %s:\n%s", stale, node, r)
	}
	if d.CSIDriverObject || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "no CSIDriver object") {
		t.Errorf("%s: want it reported without a CSIDriver object:\n%s", stale, r)
	}
	if ours := r.driver(cfg.Driver); ours == nil || !ours.Healthy() {
		t.Errorf("%s: want it still healthy:\n%s", cfg.Driver, r)
	}
	one := runStatus(t, ctx, cfg.Driver)
	if one.code != 0 {
		t.Errorf("status %s alone: want exit 0, the stale entry is another driver's:\n%s", cfg.Driver, one)
	}
	t.Logf("%s", runStatus(t, ctx))
}

// A CSIDriver object without any node plugin: the driver is registered on
// no node, and the plugin says so and exits 1 (it was "0 expected", exit 0),
// asked for every driver or for it alone; the deployed driver stays healthy.
func testStatusNoNodePlugin(t *testing.T) {
	ctx, _ := begin(t)
	const orphan = "orphan.csi-registrar.example.com"
	obj := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: orphan}}
	if _, err := cl.Client.StorageV1().CSIDrivers().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Client.StorageV1().CSIDrivers().Delete(context.Background(), orphan, metav1.DeleteOptions{}); err != nil {
			t.Errorf("removing CSIDriver %s: %v", orphan, err)
		}
	})
	r := runStatus(t, ctx, "-o", "json")
	d := r.driver(orphan)
	if r.code != clusterstatus.ExitUnhealthy || d == nil || !d.CSIDriverObject || d.Expected != 0 || d.Healthy() ||
		!strings.Contains(d.Problem, "not registered on any node") || !strings.Contains(d.Problem, "no node plugin pod") {
		t.Fatalf("want exit 1 and %s not registered on any node, no node plugin:\n%s", orphan, r)
	}
	if ours := r.driver(cfg.Driver); ours == nil || !ours.Healthy() {
		t.Errorf("%s: want it still healthy:\n%s", cfg.Driver, r)
	}
	one := runStatus(t, ctx, orphan)
	if one.code != clusterstatus.ExitUnhealthy || !strings.Contains(one.stdout, orphan) || !strings.Contains(one.stdout, "not registered on any node") {
		t.Errorf("status %s alone: want exit 1 and the reason:\n%s", orphan, one)
	}
	if ours := runStatus(t, ctx, cfg.Driver); ours.code != clusterstatus.ExitHealthy {
		t.Errorf("status %s alone: want exit 0, the CSIDriver without node plugin is another driver's:\n%s", cfg.Driver, ours)
	}
	t.Logf("%s", one)
}

// The in-process overlay (the driver registers itself; one container):
// the plugin finds it by the same rule and reports it healthy.
func testStatusInProcess(t *testing.T) {
	ctx, _ := begin(t)
	const overlay = "manifests/overlays/in-process"
	if err := cl.Apply(ctx, overlay); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*podWait)
		defer cancel()
		if err := cl.Apply(ctx, plainDir); err != nil {
			t.Errorf("restoring "+plainDir+": %v", err)
		}
		if err := cl.WaitDeployed(ctx, cfg, 3*podWait); err != nil {
			t.Errorf(plainDir+" not registered again: %v", err)
		}
	})
	if err := cl.RolledOut(ctx, cfg.Driver, 3*podWait); err != nil {
		t.Fatal(err)
	}
	r := awaitStatus(t, ctx, podWait, "in-process registration healthy", func(r statusRun) bool {
		d := r.driver(cfg.Driver)
		return r.code == 0 && d != nil && d.Registered == len(allNodes) && d.Registrar == "csi-registrar (in-process)"
	}, "-o", "json")
	_ = r
	t.Logf("%s", runStatus(t, ctx))
}

// upstreamRegistrarImage is the image of upstream's archive.
const upstreamRegistrarImage = "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0"

// The DaemonSet of plainDir with upstream's node-driver-registrar as the
// sidecar (it serves no /readyz: its readiness probe removed): the plugin
// finds it by the same rule, names it, reports it healthy, and for a node
// whose registration the kubelet rejects, gives the kubelet's side.
func testStatusUpstream(t *testing.T) {
	archive := os.Getenv("E2E_UPSTREAM_REGISTRAR_ARCHIVE")
	if archive == "" {
		t.Skip("E2E_UPSTREAM_REGISTRAR_ARCHIVE unset: upstream's image is built by hand, never in CI")
	}
	ctx, _ := begin(t)
	if err := cl.Provider.LoadImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/1/image","value":%q},
		{"op":"remove","path":"/spec/template/spec/containers/1/readinessProbe"}]`, upstreamRegistrarImage)
	if _, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Patch(ctx, cl.DaemonSet, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	node := allNodes[len(allNodes)-1]
	key := cfg.TopologyKeys()[0]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*podWait)
		defer cancel()
		_ = setTopologyLabels(ctx, node, nil)
		if err := cl.Apply(ctx, plainDir); err != nil {
			t.Errorf("restoring "+plainDir+": %v", err)
		}
		if err := cl.WaitDeployed(ctx, cfg, 3*podWait); err != nil {
			t.Errorf(plainDir+" not registered again: %v", err)
		}
	})
	upstreamOn := func() bool {
		for _, n := range allNodes {
			p, err := cl.PodOn(ctx, n)
			if err != nil || p.DeletionTimestamp != nil || drivercases.ContainerStatus(p, "registrar").Image == "" ||
				!strings.Contains(p.Spec.Containers[1].Image, "csi-node-driver-registrar") {
				return false
			}
		}
		return true
	}
	awaitStatus(t, ctx, 3*podWait, "upstream's registrar registered everywhere", func(r statusRun) bool {
		d := r.driver(cfg.Driver)
		return r.code == 0 && d != nil && d.Registered == len(allNodes) && d.Registrar == "node-driver-registrar" && upstreamOn()
	}, "-o", "json")
	t.Logf("%s", runStatus(t, ctx))

	// The kubelet rejects one node's registration.
	if err := setTopologyLabels(ctx, node, map[string]string{key: cfg.Topology[key] + "-collision"}); err != nil {
		t.Fatal(err)
	}
	pod := podOn(t, ctx, node)
	if err := cl.Client.CoreV1().Pods(cl.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := awaitStatus(t, ctx, podWait, node+" not registered, with the kubelet's side", func(r statusRun) bool {
		n := r.node(cfg.Driver, node)
		return r.code == 1 && n != nil && n.State == clusterstatus.StateNotRegistered && n.Pod != "" &&
			n.Pod != cl.Namespace+"/"+pod.Name && (strings.Contains(n.Reason, "plugin watcher") || strings.Contains(n.Reason, "pod event"))
	}, "-o", "json")
	t.Logf("%s: %s", node, r.node(cfg.Driver, node).Reason)
	t.Logf("%s", runStatus(t, ctx, "-o", "wide"))
}
