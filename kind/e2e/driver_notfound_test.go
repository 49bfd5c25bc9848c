//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/sockowner"
)

// The driver suite's search for the driver container, on a manifest where it
// cannot succeed: kind/e2e/testdata/driver-elsewhere runs the registrar in one
// DaemonSet and the driver it dials in another. The kubelet registers the
// driver (the layout works), yet no container of the registrar's pod listens
// on its --csi-address, so the search (drivercases.FindDriver, as `make e2e-driver` runs
// it) must fail with an error that names what it tried and whom it found.
const (
	elsewhereDir       = "kind/e2e/testdata/driver-elsewhere"
	elsewhereDriver    = "elsewhere.csi.example.com"
	elsewhereNamespace = "csi-driver-elsewhere"
	elsewhereRegistrar = "elsewhere-registrar" // the DaemonSets' app labels
	elsewhereDriverSet = "elsewhere-driver"
)

func TestDriverContainerNotFound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := cl.Kubectl(ctx, "kustomize", filepath.Join(cl.RepoRoot, elsewhereDir))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := driverspec.Parse([]byte(out), "csi-registrar:dev")
	if err != nil {
		t.Fatalf("%s: %v", elsewhereDir, err)
	}
	wantSock := "/var/lib/kubelet/plugins/" + elsewhereDriver + "/csi.sock"
	if spec.Workload.Name != elsewhereRegistrar || spec.Registrar != "registrar" || spec.HostSocket != wantSock {
		t.Fatalf("%s parsed as workload %s, registrar container %q, driver socket on the node %q; want DaemonSet elsewhere-registrar, registrar, %s",
			elsewhereDir, spec.Workload, spec.Registrar, spec.HostSocket, wantSock)
	}

	// Applied as the suite applies a driver: with the registrar swapped.
	y, err := spec.YAML()
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "driver-elsewhere.yaml")
	if err := os.WriteFile(manifest, y, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := cl.Kubectl(ctx, "delete", "-f", manifest, "--ignore-not-found", "--wait=true", "--timeout=180s"); err != nil {
			t.Errorf("delete %s: %v", elsewhereDir, err)
			return
		}
		if err := waitDriverUnregistered(ctx, elsewhereDriver, allNodes, time.Minute); err != nil {
			t.Errorf("delete %s: %v", elsewhereDir, err)
		}
	})
	if _, err := cl.Kubectl(ctx, "apply", "-f", manifest); err != nil {
		t.Fatal(err)
	}
	pods := waitElsewhere(t, ctx)
	registrars, drivers := pods[elsewhereRegistrar], pods[elsewhereDriverSet]

	node, ok := cl.Provider.(drivercases.Node)
	if !ok {
		t.Fatalf("provider %s runs no commands on a node", cl.Provider.Name())
	}
	driver, _, err := drivercases.FindDriver(ctx, node, spec, registrars)
	if err == nil {
		t.Fatalf("the driver container of %s was found (%q), though no container of the registrar's pod serves its socket", elsewhereDir, driver)
	}
	msg := err.Error()
	t.Logf("the search failed as it must: %v", msg)
	// The error is about the first node the search visits; the owner it
	// names is the driver DaemonSet's container there.
	first := allNodes[0]
	want := []string{
		"the registrar's --csi-address=/csi/csi.sock on the node",
		"cannot find the driver container of pod " + elsewhereNamespace + "/" + registrars[first].Name,
		"in no container of the pod (registrar=",
		wantSock, "on node " + first,
		"tried: the socket file " + wantSock,
		"/proc/<pid>/fd", "/proc/<pid>/net/unix", "/proc/<pid>/root", "/proc/<pid>/cgroup",
		"in container " + sockowner.ShortID(drivercases.ContainerID(drivercases.ContainerStatus(drivers[first], "driver"))),
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not say %q", w)
		}
	}
}

// waitElsewhere waits until a pod of each DaemonSet of driver-elsewhere is
// Ready on every node and the kubelet of every node has registered the
// driver; it returns the pods by DaemonSet and node.
func waitElsewhere(t *testing.T, ctx context.Context) map[string]map[string]*corev1.Pod {
	t.Helper()
	t0 := time.Now()
	var last string
	var pods map[string]map[string]*corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods = map[string]map[string]*corev1.Pod{}
		for _, app := range []string{elsewhereRegistrar, elsewhereDriverSet} {
			l, err := cl.Client.CoreV1().Pods(elsewhereNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false, err
			}
			pods[app] = map[string]*corev1.Pod{}
			for i := range l.Items {
				if p := &l.Items[i]; p.DeletionTimestamp == nil && drivercases.PodReady(p) {
					pods[app][p.Spec.NodeName] = p
				}
			}
			for _, n := range allNodes {
				if pods[app][n] == nil {
					last = fmt.Sprintf("no Ready pod of %s on node %s", app, n)
					return false, nil
				}
			}
		}
		for _, n := range allNodes {
			r, err := cl.Registered(ctx, n, elsewhereDriver)
			if err != nil {
				return false, err
			}
			if !r.Registered() {
				last = fmt.Sprintf("node %s: %d CSINode entries for %s, annotated %v", n, len(r.Entries), elsewhereDriver, r.Annotated)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: %v: %s", elsewhereDir, err, last)
	}
	measure(t, "apply "+elsewhereDir+" -> registered on "+strings.Join(allNodes, ","), time.Since(t0))
	return pods
}
