//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/csi-registrar/csi-registrar/registrar/nodestatus"
)

// manifests/components/node-readiness/ on the suite's deployment
// (kind/e2e/overlays/node-readiness): the registrar owns the Node condition,
// lifts the startup taint, heals a deleted CSINode; its service account may
// write only its own Node.
const (
	readinessOverlay = "kind/e2e/overlays/node-readiness"
	// The local node's pods reach its API server only on the host's network.
	readinessOverlayLocal = "kind/e2e/overlays/node-readiness-local"
	readinessCondition    = "stub.csi.example.com/NodePluginRegistered"
	readinessTaint        = "stub.csi.example.com/agent-not-ready"
	readinessSA           = "csi-stub-node"
	otherNodeName         = "csi-registrar-e2e-other-node"
)

// TestNodeReadiness: every node tainted with the startup taint as a kubelet
// with --register-with-taints would be, then the component deployed: the
// condition turns True after the kubelet confirmed, the taint goes; the
// pod's token may patch its own Node's status and not another Node's (403);
// the CSINode deleted comes back with the driver's entry without a restart.
func TestNodeReadiness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t.Cleanup(func() { cleanupReadiness(t) })

	withoutDriver(t, ctx)
	for _, n := range allNodes {
		if err := patchNode(ctx, n, func(nd *corev1.Node) {
			nd.Spec.Taints = append(nd.Spec.Taints, corev1.Taint{Key: readinessTaint, Effect: corev1.TaintEffectNoSchedule})
		}); err != nil {
			t.Fatal(err)
		}
	}
	overlay := readinessOverlay
	if cl.Provider.Name() == "local" {
		overlay = readinessOverlayLocal
	}
	recs := recordRegistration(t, ctx)
	t0 := time.Now()
	if err := cl.Apply(ctx, overlay); err != nil {
		t.Fatal(err)
	}
	for _, n := range allNodes {
		iTrue, condTrue, err := recs[n].node.Await(ctx, 0, 3*time.Minute, readinessCondition+" True", func(s State) bool {
			nd := s.Node(n)
			return nd != nil && conditionOf(nd) != nil && conditionOf(nd).Status == corev1.ConditionTrue
		})
		if err != nil {
			t.Fatal(err)
		}
		measure(t, "apply -> condition True on "+n, condTrue.At.Sub(t0))
		reg, err := cl.Registered(ctx, n, cfg.Driver)
		if err != nil {
			t.Fatal(err)
		}
		if p := RegistrationProblems(reg, n, cfg); len(p) > 0 {
			t.Errorf("condition True on %s before the kubelet's registration was complete: %s", n, strings.Join(p, "; "))
		}
		_, untainted, err := recs[n].node.Await(ctx, iTrue, time.Minute, "taint "+readinessTaint+" gone", func(s State) bool {
			nd := s.Node(n)
			return nd != nil && !hasTaint(nd, readinessTaint)
		})
		if err != nil {
			t.Fatal(err)
		}
		measure(t, "condition True -> startup taint gone on "+n, untainted.At.Sub(condTrue.At))
		cond := conditionOf(untainted.State.Node(n))
		t.Logf("node %s: %s=%s reason %s: %s (transition %s, heartbeat %s)", n, cond.Type, cond.Status, cond.Reason, cond.Message,
			cond.LastTransitionTime.Format(time.RFC3339), cond.LastHeartbeatTime.Format(time.RFC3339))
	}

	node := allNodes[0]
	pod, err := cl.PodOn(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("own node only", func(t *testing.T) { testOwnNodeOnly(t, ctx, node, pod) })
	t.Run("CSINode deleted", func(t *testing.T) { testCSINodeHealed(t, ctx, node, pod) })
}

// testOwnNodeOnly: the pod's own token (bound to the pod, so to its node)
// patches its Node's condition, and the same patch of another Node is
// refused with 403 by the ValidatingAdmissionPolicy; a taint removal too.
func testOwnNodeOnly(t *testing.T, ctx context.Context, node string, pod *corev1.Pod) {
	c := cl.Client.CoreV1()
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: otherNodeName},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: readinessTaint, Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := c.Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := cl.Kubectl(ctx, "create", "token", readinessSA, "-n", cl.Namespace, "--bound-object-kind=Pod", "--bound-object-name="+pod.Name, "--duration=10m")
	if err != nil {
		t.Fatal(err)
	}
	client := tokenClient(t, strings.TrimSpace(token))

	cond := nodestatus.Condition{Type: readinessCondition, Status: "True", Reason: nodestatus.ReasonRegistered,
		Message: "e2e: the same patch on two Nodes", LastHeartbeatTime: time.Now().UTC().Format(time.RFC3339)}
	own, err := client.GetNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, oc := range own.Status.Conditions {
		if oc.Type == readinessCondition {
			cond.LastTransitionTime = oc.LastTransitionTime
		}
	}
	if _, err := client.PatchNodeConditions(ctx, node, cond); err != nil {
		t.Fatalf("the pod's token patching its own Node %s: %v", node, err)
	}
	_, err = client.PatchNodeConditions(ctx, otherNodeName, cond)
	if !nodestatus.IsForbidden(err) {
		t.Fatalf("the pod's token patching another Node's status: %v; want 403", err)
	}
	t.Logf("patch of %s/status with the token of %s (node %s): %v", otherNodeName, pod.Name, node, err)
	if err := client.RemoveTaint(ctx, otherNodeName, 0, readinessTaint); !nodestatus.IsForbidden(err) {
		t.Errorf("the pod's token removing another Node's taint: %v; want 403", err)
	}
	// On its own Node: another condition is not its to change.
	if _, err := client.PatchNodeConditions(ctx, node, nodestatus.Condition{Type: "Ready", Status: "False", Reason: "E2E"}); !nodestatus.IsForbidden(err) {
		t.Errorf("the pod's token changing its Node's Ready condition: %v; want 403", err)
	}
	// A token of the account bound to no pod carries no node: refused.
	plain, err := cl.Kubectl(ctx, "create", "token", readinessSA, "-n", cl.Namespace, "--duration=10m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokenClient(t, strings.TrimSpace(plain)).PatchNodeConditions(ctx, node, cond); !nodestatus.IsForbidden(err) {
		t.Errorf("a token bound to no pod patching the Node: %v; want 403", err)
	}
}

// testCSINodeHealed: the node's CSINode deleted (as the garbage collector
// does after the Node is deleted and created again): the registrar
// registers again and the kubelet writes the entry back, without a restart.
func testCSINodeHealed(t *testing.T, ctx context.Context, node string, pod *corev1.Pod) {
	before := Restarts(pod)
	m0, err := cl.Metrics(ctx, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := cl.RecordCSINode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Stop()
	t0 := time.Now()
	if err := cl.Client.StorageV1().CSINodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	iGone, _, err := cn.Await(ctx, 0, time.Minute, "CSINode deleted", func(s State) bool { return s.CSINode(node) == nil })
	if err != nil {
		t.Fatal(err)
	}
	_, back, err := cn.Await(ctx, iGone, 2*time.Minute, "the driver's entry back", func(s State) bool { return listsDriver(s, node) })
	if err != nil {
		t.Fatal(err)
	}
	measure(t, "CSINode deleted -> driver's entry back on "+node, back.At.Sub(t0))
	// The kubelet writes the Node's annotation before the CSINode entry.
	reg, err := cl.Registered(ctx, node, cfg.Driver)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range RegistrationProblems(reg, node, cfg) {
		t.Errorf("after the heal: %s", p)
	}
	p, err := cl.Client.CoreV1().Pods(cl.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pod is gone: %v", err)
	}
	if after := Restarts(p); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("restarts %v, before %v: healed by a restart", after, before)
	}
	m1, err := cl.Metrics(ctx, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	series := MetricSocketCreations("csinode-lost")
	if got := m1.Get(series) - m0.Get(series); got != 1 {
		t.Errorf("%s grew by %v, want 1", series, got)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		code, _, err := cl.Readyz(ctx, pod.Name)
		return err == nil && code == 200, nil
	}); err != nil {
		t.Errorf("/readyz not 200 after the heal: %v", err)
	}
}

// tokenClient is registrar/nodestatus's client (the one in the image) with
// a bearer token, on the suite's API server.
func tokenClient(t *testing.T, token string) *nodestatus.Client {
	rc, err := clientcmd.BuildConfigFromFlags("", cl.Provider.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	ca := rc.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(rc.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := nodestatus.NewClient(rc.Host, ca, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func conditionOf(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if string(n.Status.Conditions[i].Type) == readinessCondition {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

// patchNode changes a Node with a retry on conflict.
func patchNode(ctx context.Context, name string, f func(*corev1.Node)) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cl.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		f(n)
		_, err = cl.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// withoutDriver removes the suite's deployment (plainDir), waits until no
// node's kubelet lists the driver, and takes the suite's condition off every
// Node: the start of a test of the condition.
func withoutDriver(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := cl.Delete(ctx, plainDir); err != nil {
		t.Fatal(err)
	}
	if err := waitDriverUnregistered(ctx, cfg.Driver, allNodes, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range allNodes {
		if err := removeCondition(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

// removeTaint takes every taint with key off the Node.
func removeTaint(ctx context.Context, name, key string) error {
	return patchNode(ctx, name, func(nd *corev1.Node) {
		var keep []corev1.Taint
		for _, tn := range nd.Spec.Taints {
			if tn.Key != key {
				keep = append(keep, tn)
			}
		}
		nd.Spec.Taints = keep
	})
}

// removeCondition takes the suite's condition off the Node (a JSON patch of
// the status, by index, tested).
func removeCondition(ctx context.Context, name string) error {
	n, err := cl.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i, c := range n.Status.Conditions {
		if string(c.Type) != readinessCondition {
			continue
		}
		p, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": fmt.Sprintf("/status/conditions/%d/type", i), "value": readinessCondition},
			{"op": "remove", "path": fmt.Sprintf("/status/conditions/%d", i)},
		})
		_, err := cl.Client.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, p, metav1.PatchOptions{}, "status")
		return err
	}
	return nil
}

// cleanupReadiness: the suite's deployment back, the component's cluster
// objects, the condition, the taint and the other Node gone.
func cleanupReadiness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, obj := range []string{"validatingadmissionpolicybinding/csi-registrar-node-readiness", "validatingadmissionpolicy/csi-registrar-node-readiness",
		"clusterrolebinding/csi-registrar-node-readiness", "clusterrole/csi-registrar-node-readiness"} {
		if _, err := cl.Kubectl(ctx, "delete", obj, "--ignore-not-found"); err != nil {
			t.Errorf("delete %s: %v", obj, err)
		}
	}
	if err := cl.Client.CoreV1().Nodes().Delete(ctx, otherNodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete node %s: %v", otherNodeName, err)
	}
	// Applying the base over the overlay's DaemonSet cannot take its service
	// account away: the API server copies the deprecated spec.serviceAccount
	// back into serviceAccountName, and the pods created after the account is
	// deleted below are refused (seen on kind: TestStatus found 2 pods of 3).
	// So the overlay's objects go, and the base is created anew.
	if err := cl.Delete(ctx, plainDir); err != nil {
		t.Errorf("delete %s: %v", plainDir, err)
	}
	restoreBase(t)
	if _, err := cl.Kubectl(ctx, "delete", "serviceaccount", readinessSA, "-n", cl.Namespace, "--ignore-not-found"); err != nil {
		t.Errorf("delete serviceaccount: %v", err)
	}
	for _, n := range allNodes {
		if err := removeTaint(ctx, n, readinessTaint); err != nil {
			t.Errorf("node %s: remove taint %s: %v", n, readinessTaint, err)
		}
		if err := removeCondition(ctx, n); err != nil {
			t.Errorf("node %s: remove condition: %v", n, err)
		}
	}
}
