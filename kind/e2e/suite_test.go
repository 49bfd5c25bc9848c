//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Environment:
//
//	E2E_PROVIDER       local (default) or kind
//	E2E_IMAGE_ARCHIVE  the image to test (default bin/image.tar, from `make image`)
//	E2E_KEEP           set: leave the cluster up (and the last state deployed) at the end
//	LOCALNODE_LOCKED   1: the caller holds the local node's lock (kind/nodelock.sh sets it)
const (
	// manifestsDir is the reference deployment, in the rolling-update mode:
	// rollout_test.go rolls it, and `make e2e-driver DRIVER=manifests` runs
	// verify's registration cases on it.
	manifestsDir = "manifests"
	// plainDir is the deployment the suite keeps between tests: the reference
	// without the rolling-update mode, the registrar as a drop-in for
	// node-driver-registrar (one socket, <driver>-reg.sock). TestE2E's cases
	// check that registrar's behaviour, socket by socket.
	plainDir     = "manifests/overlays/without-rolling-update"
	retryOverlay = "kind/e2e/overlays/retry"
	// nodeLockScript runs a command under the lock that serialises every
	// user of the one local node (the Makefile's with_node_lock calls it too).
	nodeLockScript = "kind/nodelock.sh"
	// lockedEnv is set (to 1) in the environment of whoever holds the lock.
	lockedEnv = "LOCALNODE_LOCKED"
)

var (
	cl       *Cluster
	cfg      DriverConfig // what plainDir configures
	allNodes []string     // every node (the DaemonSet tolerates every taint), sorted
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func logf(format string, args ...any) {
	fmt.Printf("e2e %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func runSuite(m *testing.M) int {
	flag.Parse()
	start := time.Now()
	defer func() { logf("suite finished in %s", time.Since(start).Round(100*time.Millisecond)) }()
	root, err := RepoRoot()
	if err != nil {
		logf("%v", err)
		return 1
	}
	name := os.Getenv("E2E_PROVIDER")
	if name == "" {
		name = "local"
	}
	if name == "local" && os.Getenv(lockedEnv) != "1" {
		// The one lock implementation is kind/nodelock.sh (the Makefile's
		// too): LOCALNODE_LOCKED=1 for the holder. Run again under it.
		err := relockUnderNodeLock(root)
		logf("%v", err)
		return 1
	}
	p, err := NewProvider(name, root)
	if err != nil {
		logf("%v", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	t := time.Now()
	logf("provider %s: bringing the cluster up", p.Name())
	started, err := p.Up(ctx)
	if err != nil {
		logf("%v", err)
		return 1
	}
	logf("cluster up in %s (started now: %v)", time.Since(t).Round(100*time.Millisecond), started)
	if os.Getenv("E2E_KEEP") == "" {
		defer func() {
			t := time.Now()
			if err := p.Down(context.Background()); err != nil {
				logf("tear-down: %v", err)
			}
			logf("cluster torn down in %s", time.Since(t).Round(100*time.Millisecond))
		}()
	} else {
		defer logf("E2E_KEEP is set: the cluster stays up (KUBECONFIG=%s)", p.Kubeconfig())
	}
	if cl, err = NewCluster(p, root); err != nil {
		logf("%v", err)
		return 1
	}
	if v, err := cl.Client.Discovery().ServerVersion(); err == nil {
		logf("Kubernetes: API server %s", v.GitVersion)
	}
	if nl, err := cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nl.Items {
			logf("Kubernetes: node %s runs kubelet %s (%s)", n.Name, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.KernelVersion)
		}
	}
	if err := setup(ctx, root); err != nil {
		logf("setup failed: %v", err)
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		fmt.Println(cl.Diagnostics(dctx, allNodes))
		return 1
	}
	code := m.Run()
	printTimings()
	if os.Getenv("E2E_KEEP") == "" {
		// Nothing of the suite's left deployed for the cluster's next user
		// (the local node's API objects outlive its processes; verify refuses
		// to run beside an installed copy of the driver it installs).
		t := time.Now()
		dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer dcancel()
		if err := cl.Delete(dctx, plainDir); err != nil {
			logf("removing %s: %v", plainDir, err)
			code = max(code, 1)
		} else {
			logf("removed %s in %s", plainDir, time.Since(t).Round(100*time.Millisecond))
		}
	}
	return code
}

// relockUnderNodeLock replaces this process with itself run under the local
// node's lock, as the Makefile's with_node_lock runs a command: `bash
// kind/nodelock.sh ARGS...`, which says when it waits and sets
// LOCALNODE_LOCKED=1. It returns only on an error.
func relockUnderNodeLock(root string) error {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("the local node's lock: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{bash, filepath.Join(root, nodeLockScript), self}, os.Args[1:]...)
	return fmt.Errorf("exec %s: %w", nodeLockScript, syscall.Exec(bash, args, os.Environ()))
}

// setup loads the image, starts from a clean slate (nothing of ours
// deployed, no topology label left from an earlier run, so that the kubelet
// is seen writing it) and deploys plainDir, measuring how long the kubelet
// took to register the driver on each node.
func setup(ctx context.Context, root string) error {
	archive := os.Getenv("E2E_IMAGE_ARCHIVE")
	if archive == "" {
		archive = filepath.Join(root, "bin", "image.tar")
	}
	if _, err := os.Stat(archive); err != nil {
		return fmt.Errorf("image archive: %w (run `make image`, or set E2E_IMAGE_ARCHIVE)", err)
	}
	t := time.Now()
	if err := cl.Provider.LoadImage(ctx, archive); err != nil {
		return err
	}
	logf("loaded %s in %s", archive, time.Since(t).Round(100*time.Millisecond))

	ds, err := cl.RenderDaemonSet(ctx, plainDir)
	if err != nil {
		return err
	}
	if cfg, err = ConfigOf(ds); err != nil {
		return err
	}
	if !cfg.NodeIDIsNodeName || len(cfg.Topology) == 0 || cfg.MaxVolumes <= 0 {
		return fmt.Errorf("%s must pass --node-id=$(KUBE_NODE_NAME) from spec.nodeName, a --topology and --max-volumes-per-node for the suite to check them: %+v", plainDir, cfg)
	}
	logf("%s configures: driver %s, node ID = node name, topology %v, max volumes %d", plainDir, cfg.Driver, cfg.Topology, cfg.MaxVolumes)

	if allNodes, err = cl.NodeNames(ctx); err != nil {
		return err
	}

	t = time.Now()
	if err := cl.Delete(ctx, plainDir); err != nil {
		return err
	}
	for _, n := range allNodes {
		if err := setTopologyLabels(ctx, n, nil); err != nil {
			return err
		}
		// Nothing of ours runs now: a socket of ours left in plugins_registry
		// was leaked by a killed registrar (or a broken one) and keeps the
		// driver registered. Remove it, as an operator would.
		files, err := cl.Provider.PluginsRegistry(ctx, n)
		if err != nil {
			return err
		}
		for _, f := range files {
			if strings.HasPrefix(f.Name, cfg.Driver) {
				logf("node %s: removing %s/%s, left behind by an earlier run", n, PluginsRegistry, f.Name)
				if err := cl.Provider.RemoveFile(ctx, n, PluginsRegistry+"/"+f.Name); err != nil {
					return err
				}
			}
		}
	}
	if err := waitUnregistered(ctx, 30*time.Second); err != nil {
		// No socket of ours is left, yet the API still says registered: the
		// kubelet lost the registration (e.g. it failed to re-register after
		// a restart) and will never remove it. Remove it as it would have.
		logf("%v: removing the stale registration through the API", err)
		for _, n := range allNodes {
			if err := clearRegistration(ctx, n, cfg.Driver); err != nil {
				return err
			}
		}
		if err := waitUnregistered(ctx, 30*time.Second); err != nil {
			return err
		}
	}
	logf("clean slate (nothing deployed, no topology label) in %s", time.Since(t).Round(100*time.Millisecond))

	var recs []*Recorder
	for _, n := range allNodes {
		r, err := cl.RecordCSINode(ctx, n)
		if err != nil {
			return err
		}
		defer r.Stop()
		recs = append(recs, r)
	}
	pods, err := cl.RecordPods(ctx)
	if err != nil {
		return err
	}
	defer pods.Stop()
	t0 := time.Now()
	if err := cl.Apply(ctx, plainDir); err != nil {
		return err
	}
	// Registered, whatever the values: case 1 checks them.
	if err := cl.RolledOut(ctx, cfg.Driver, 3*time.Minute); err != nil {
		return err
	}
	for i, n := range allNodes {
		_, ev, err := recs[i].Await(ctx, 0, time.Second, "entry registered", func(s State) bool {
			return len(drivercases.CSINodeEntries(s.CSINode(n), cfg.Driver)) == 1
		})
		if err != nil {
			return err
		}
		record("setup", fmt.Sprintf("apply -k %s -> CSINode entry on %s", plainDir, n), ev.At.Sub(t0))
		_, ev, err = pods.Await(ctx, 0, time.Second, "pod Ready", func(s State) bool {
			for _, p := range s.Pods() {
				if p.Spec.NodeName == n && drivercases.PodReady(p) {
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
		record("setup", fmt.Sprintf("apply -k %s -> pod Ready on %s", plainDir, n), ev.At.Sub(t0))
	}
	return nil
}

// setTopologyLabels sets the configured topology keys on a node to the values
// in vals, and removes those that vals does not name.
func setTopologyLabels(ctx context.Context, node string, vals map[string]string) error {
	labels := map[string]any{}
	for k := range cfg.Topology {
		if v, ok := vals[k]; ok {
			labels[k] = v
		} else {
			labels[k] = nil
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	_, err := cl.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// clearRegistration removes the driver's key from the node annotation and its
// entry from the CSINode, as the kubelet does when it unregisters a driver.
func clearRegistration(ctx context.Context, node, driver string) error {
	nd, err := cl.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	m, err := drivercases.AnnotationMap(nd)
	if err != nil {
		return err
	}
	if _, ok := m[driver]; ok {
		delete(m, driver)
		var v any // null removes the annotation
		if len(m) > 0 {
			js, _ := json.Marshal(m)
			v = string(js)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{csiplugin.NodeIDAnnotation: v}}})
		if _, err := cl.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	cn, err := cl.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kept := cn.Spec.Drivers[:0]
	for _, d := range cn.Spec.Drivers {
		if d.Name != driver {
			kept = append(kept, d)
		}
	}
	if len(kept) != len(cn.Spec.Drivers) {
		cn.Spec.Drivers = kept
		_, err = cl.Client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{})
	}
	return err
}

// waitUnregistered waits until no node has the driver in its annotation or
// CSINode (the kubelet unregisters it when its socket goes).
func waitUnregistered(ctx context.Context, timeout time.Duration) error {
	return waitDriverUnregistered(ctx, cfg.Driver, allNodes, timeout)
}

// waitDriverUnregistered waits until none of nodes has driver in its
// annotation or CSINode.
func waitDriverUnregistered(ctx context.Context, driver string, nodes []string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range nodes {
			r, err := cl.Registered(ctx, n, driver)
			if err != nil {
				return false, err
			}
			if !r.Absent() {
				last = fmt.Sprintf("node %s: annotated %v, %d CSINode entries", n, r.Annotated, len(r.Entries))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("driver %s is still registered (%s): %w; is a socket of a process that is gone still in %s?", driver, last, err, PluginsRegistry)
	}
	return nil
}

// Measured times, printed as they are taken and again at the end.
var (
	timingsMu sync.Mutex
	timings   []timing
)

type timing struct {
	scope, what string
	d           time.Duration
}

func record(scope, what string, d time.Duration) {
	timingsMu.Lock()
	timings = append(timings, timing{scope, what, d})
	timingsMu.Unlock()
	logf("measured [%s] %s: %.3f s", scope, what, d.Seconds())
}

// measure records a time measured by test t.
func measure(t testing.TB, what string, d time.Duration) {
	t.Helper()
	scope := t.Name()
	if i := strings.IndexByte(scope, '/'); i >= 0 {
		scope = scope[i+1:]
	}
	timingsMu.Lock()
	timings = append(timings, timing{scope, what, d})
	timingsMu.Unlock()
	t.Logf("measured: %s: %.3f s", what, d.Seconds())
}

func printTimings() {
	timingsMu.Lock()
	defer timingsMu.Unlock()
	fmt.Println("\n==== measured times (seconds) ====")
	w := 0
	for _, x := range timings {
		w = max(w, len(x.scope))
	}
	for _, x := range timings {
		fmt.Printf("%-*s  %8.3f  %s\n", w, x.scope, x.d.Seconds(), x.what)
	}
	fmt.Println()
}
