//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

// The Node Readiness Controller (kubernetes-sigs/node-readiness-controller,
// built here: make node-readiness-controller-image) gating the nodes on the
// condition the registrar writes: manifests/examples/node-readiness-controller/'s
// rule, in continuous enforcement, with manifests/overlays/node-readiness/
// (the rolling-update mode and --node-condition).
const (
	nrcDir       = "kind/e2e/testdata/node-readiness-controller"
	nrcRuleDir   = "manifests/examples/node-readiness-controller"
	nrcPluginDir = "manifests/overlays/node-readiness"
	nrcNamespace = "node-readiness-controller"
	nrcRule      = "nodereadinessrule/stub-csi-node-plugin-registered"
	nrcCRD       = "crd/nodereadinessrules.readiness.node.x-k8s.io"
	nrcTaint     = "readiness.k8s.io/stub.csi.example.com-not-registered"
	// nrcPods is the namespace of the pods that need the driver.
	nrcPods     = "csi-e2e-nrc"
	nrcPodLabel = "app.kubernetes.io/name=csi-e2e-nrc"
	nrcRollouts = 3
)

// TestNodeReadinessController: the controller and the rule installed before
// the driver: every node is tainted; a pod per node that needs the driver
// (an inline volume) is refused by the scheduler until its node's driver is
// registered; the node plugin installed: per node, the time from the
// kubelet's confirmation (the CSINode lists the driver) to the condition
// True and to the taint gone; then nrcRollouts rollouts of the node plugin:
// no condition change, no taint, no registration gap.
func TestNodeReadinessController(tt *testing.T) {
	if cl.Provider.Name() != "kind" {
		tt.Skip("runs on kind's three nodes only (make e2e-kind): the controller's pod reaches the API server through the Service network, which the local node has not")
	}
	archive := os.Getenv("E2E_NRC_ARCHIVE")
	if archive == "" {
		tt.Skip("E2E_NRC_ARCHIVE is not set: make e2e-kind builds the Node Readiness Controller's image (make node-readiness-controller-image NRC_SRC=<its git dir>) and sets it")
	}
	crd := archive + ".crd.yaml"
	for _, f := range []string{archive, crd} {
		if _, err := os.Stat(f); err != nil {
			tt.Fatalf("%v (make node-readiness-controller-image writes the image and its CRD)", err)
		}
	}
	t := withRecap(tt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	loadExampleImage(t, ctx)
	t0 := time.Now()
	if err := cl.Provider.LoadImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	measure(t, "load the Node Readiness Controller's image", time.Since(t0))
	t.Cleanup(func() { cleanupReadiness(tt) })
	t.Cleanup(func() { cleanupController(tt, crd) })
	controllerLogsOnFailure(tt)
	diagnoseOnFailure(tt)

	// Nothing of the driver: no registration, no condition.
	withoutDriver(t, ctx)

	// The controller, its CRD from the source it was built from.
	if _, err := cl.Kubectl(ctx, "apply", "--server-side", "-f", crd); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Kubectl(ctx, "wait", "--for=condition=Established", nrcCRD, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Apply(ctx, nrcDir); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Kubectl(ctx, "rollout", "status", "-n", nrcNamespace, "deployment/node-readiness-controller", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	recs := recordRegistration(t, ctx)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nrcPods}}
	if _, err := cl.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pods, err := drivercases.RecordPods(ctx, cl.Client, nrcPods, nrcPodLabel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pods.Stop)

	// The rule: the controller taints every node (the condition is absent).
	t0 = time.Now()
	if err := cl.Apply(ctx, nrcRuleDir); err != nil {
		t.Fatal(err)
	}
	tainted := map[string]int{}
	for _, n := range allNodes {
		i, _, err := recs[n].node.Await(ctx, 0, 2*time.Minute, "taint "+nrcTaint, func(s State) bool {
			nd := s.Node(n)
			return nd != nil && hasTaint(nd, nrcTaint)
		})
		if err != nil {
			t.Fatal(err)
		}
		tainted[n] = i
	}
	measure(t, "rule applied -> every node tainted", time.Since(t0))

	// A pod per node that needs the driver, before the driver: the
	// scheduler refuses each (the taint).
	podOf := map[string]string{}
	for i, n := range allNodes {
		p := nrcPod(fmt.Sprintf("needs-driver-%d", i), n)
		if _, err := cl.Client.CoreV1().Pods(nrcPods).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		podOf[n] = p.Name
	}
	for _, n := range allNodes {
		_, ev, err := pods.Await(ctx, 0, time.Minute, "pod "+podOf[n]+" unschedulable", func(s State) bool {
			p := podNamed(s, podOf[n])
			c := podScheduled(p)
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		})
		if err != nil {
			t.Fatal(err)
		}
		c := podScheduled(podNamed(ev.State, podOf[n]))
		// The scheduler names no key (1.37: "3 node(s) had untolerated
		// taint(s)"); the pod's node has no other taint it does not tolerate.
		if !strings.Contains(c.Message, "untolerated taint") {
			t.Errorf("pod %s (node %s) unschedulable, but not for a taint: %s", podOf[n], n, c.Message)
		}
		t.Logf("pod %s (node %s) before the driver: %s", podOf[n], n, c.Message)
	}

	// The node plugin with the condition (the rolling-update mode).
	tInstall := time.Now()
	if err := cl.Apply(ctx, nrcPluginDir); err != nil {
		t.Fatal(err)
	}
	early := 0
	for _, n := range allNodes {
		_, confirmed, err := recs[n].csinode.Await(ctx, 0, 3*time.Minute, "the driver listed", func(s State) bool {
			return listsDriver(s, n)
		})
		if err != nil {
			t.Fatal(err)
		}
		iTrue, condTrue, err := recs[n].node.Await(ctx, tainted[n], 3*time.Minute, readinessCondition+" True", func(s State) bool {
			nd := s.Node(n)
			return nd != nil && conditionOf(nd) != nil && conditionOf(nd).Status == corev1.ConditionTrue
		})
		if err != nil {
			t.Fatal(err)
		}
		iGone, untainted, err := recs[n].node.Await(ctx, tainted[n], 2*time.Minute, "taint "+nrcTaint+" gone", func(s State) bool {
			nd := s.Node(n)
			return nd != nil && !hasTaint(nd, nrcTaint)
		})
		if err != nil {
			t.Fatal(err)
		}
		if iGone < iTrue {
			t.Errorf("node %s: the taint went before the condition was True", n)
		}
		_, sched, err := pods.Await(ctx, 0, 2*time.Minute, "pod "+podOf[n]+" scheduled", func(s State) bool {
			p := podNamed(s, podOf[n])
			return p != nil && p.Spec.NodeName != ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if sched.At.Before(confirmed.At) {
			early++
			t.Errorf("pod %s scheduled on %s at %s, before the kubelet registered the driver there (%s)", podOf[n], n,
				sched.At.Format("15:04:05.000"), confirmed.At.Format("15:04:05.000"))
		}
		c := conditionOf(condTrue.State.Node(n))
		measure(t, "node plugin applied -> kubelet confirmed on "+n, confirmed.At.Sub(tInstall))
		measure(t, "kubelet confirmed -> condition True on "+n, condTrue.At.Sub(confirmed.At))
		measure(t, "kubelet confirmed -> taint gone on "+n, untainted.At.Sub(confirmed.At))
		t.Logf("node-readiness-controller: node %s: kubelet confirmed (CSINode lists %s) -> condition True %.3f s, -> taint %s gone %.3f s, -> pod %s scheduled %.3f s (condition lastTransitionTime %s, reason %s)",
			n, cfg.Driver, condTrue.At.Sub(confirmed.At).Seconds(), nrcTaint, untainted.At.Sub(confirmed.At).Seconds(),
			podOf[n], sched.At.Sub(confirmed.At).Seconds(), c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason)
	}
	t.Logf("node-readiness-controller: pods scheduled before their node's registration: %d of %d", early, len(allNodes))
	if err := cl.RolledOut(ctx, cfg.Driver, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range allNodes {
		if _, _, err := pods.Await(ctx, 0, 2*time.Minute, "pod "+podOf[n]+" running", func(s State) bool {
			p := podNamed(s, podOf[n])
			return p != nil && p.Status.Phase == corev1.PodRunning
		}); err != nil {
			t.Fatalf("%v: its inline volume not mounted?", err)
		}
	}

	// Rollouts of the node plugin in continuous enforcement.
	from := positions(recs)
	// Each rollout ends as rolloutDone's step does: the old pods gone, the
	// driver still registered a kubeletRound later (the observation window
	// of the assertions below: the kubelet acts on the last old pod's exit
	// within one round, the controller on the Node within the same).
	for i := 1; i <= nrcRollouts; i++ {
		before, err := cl.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rollOut(t, ctx, fmt.Sprintf("nrc-%d", i))
		if _, err := rolloutDone(ctx, cl, cfg.Driver, before, 2*time.Minute); err != nil {
			t.Fatalf("rollout nrc-%d: %v", i, err)
		}
	}
	changes, taints, gaps := 0, 0, 0
	var per []string
	for _, n := range allNodes {
		if err := recs[n].node.Err(); err != nil {
			t.Errorf("node %s: the watch broke, a change may have been missed: %v", n, err)
		}
		c, tn := conditionChanges(recs[n].node.Events(max(from[n].node-1, 0)), n)
		g := registrationGaps(recs[n], from[n], cfg.Driver, n)
		changes, taints, gaps = changes+len(c), taints+tn, gaps+len(g)
		per = append(per, fmt.Sprintf("%s %d/%d/%d", n, len(c), tn, len(g)))
		for _, x := range c {
			t.Errorf("node %s during the rollouts: %s", n, x)
		}
		if tn > 0 {
			t.Errorf("node %s: taint %s added %d time(s) during the rollouts", n, nrcTaint, tn)
		}
		if len(g) > 0 {
			t.Errorf("node %s: the driver was unregistered during the rollouts: %s", n, strings.Join(g, "; "))
		}
	}
	t.Logf("node-readiness-controller: %d rollouts: condition changes %d, taints added %d, registration gaps %d (per node changes/taints/gaps: %s)",
		nrcRollouts, changes, taints, gaps, strings.Join(per, ", "))

	// Least privilege: the controller's own RBAC (testdata) was enough.
	logs, err := cl.Kubectl(ctx, "logs", "-n", nrcNamespace, "deployment/node-readiness-controller")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("the controller was refused a request (%s/rbac.yaml): %s", nrcDir, line)
		}
	}
}

// nrcPod needs the driver (workloadPod's inline volume) and may run on node
// only; it tolerates the control plane's taint, not the rule's. The
// scheduler places it (no nodeName): the rule's taint can keep it off.
func nrcPod(name, node string) *corev1.Pod {
	p := workloadPod(name, "")
	p.Namespace = nrcPods
	p.Labels = map[string]string{"app.kubernetes.io/name": "csi-e2e-nrc"}
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return p
}

func podNamed(s State, name string) *corev1.Pod {
	for _, p := range s.Pods() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	if p == nil {
		return nil
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// listsDriver: the CSINode of node in s lists the suite's driver.
func listsDriver(s State, node string) bool {
	cn := s.CSINode(node)
	if cn == nil {
		return false
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == cfg.Driver {
			return true
		}
	}
	return false
}

// conditionChanges lists, in the recorded states of a Node, each change of
// the condition's status or lastTransitionTime (a heartbeat is none), and
// counts the times the rule's taint appeared. The first event is the state
// before.
func conditionChanges(evs []Event, node string) (changes []string, taintsAdded int) {
	var prev *corev1.NodeCondition
	prevTaint := false
	for i, ev := range evs {
		nd := ev.State.Node(node)
		if nd == nil {
			continue
		}
		c, tn := conditionOf(nd), hasTaint(nd, nrcTaint)
		if i > 0 {
			switch {
			case (prev == nil) != (c == nil):
				changes = append(changes, fmt.Sprintf("%s: condition present %v -> %v", ev.At.Format("15:04:05.000"), prev != nil, c != nil))
			case c != nil && (c.Status != prev.Status || !c.LastTransitionTime.Equal(&prev.LastTransitionTime)):
				changes = append(changes, fmt.Sprintf("%s: condition %s (since %s) -> %s %s (since %s)", ev.At.Format("15:04:05.000"),
					prev.Status, prev.LastTransitionTime.UTC().Format(time.RFC3339), c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339)))
			}
			if tn && !prevTaint {
				taintsAdded++
			}
		}
		if c != nil {
			cp := *c
			prev = &cp
		} else {
			prev = nil
		}
		prevTaint = tn
	}
	return changes, taintsAdded
}

// controllerLogsOnFailure prints the controller's log and the rule's status
// when t failed.
func controllerLogsOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := cl.Kubectl(ctx, "logs", "-n", nrcNamespace, "deployment/node-readiness-controller", "--tail=200")
		fmt.Printf("==== the Node Readiness Controller's log (err %v)\n%s\n", err, out)
		out, err = cl.Kubectl(ctx, "get", nrcRule, "-o", "yaml")
		fmt.Printf("==== %s (err %v)\n%s\n", nrcRule, err, out)
	})
}

// cleanupController removes the pods that need the driver, the rule (the
// controller removes its taint and finalizer), the controller and its CRD,
// and the taint from every node whatever happened.
func cleanupController(t testing.TB, crd string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := cl.Kubectl(ctx, "delete", "namespace", nrcPods, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
		t.Errorf("delete namespace %s: %v", nrcPods, err)
	}
	if _, err := cl.Kubectl(ctx, "delete", "-k", nrcRuleDir, "--ignore-not-found", "--wait=true", "--timeout=60s"); err != nil {
		t.Errorf("delete the rule: %v", err)
		// The controller did not remove its finalizer: take it off.
		if _, err := cl.Kubectl(ctx, "patch", nrcRule, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`); err != nil {
			t.Logf("remove the rule's finalizer: %v", err)
		}
	}
	if err := cl.Delete(ctx, nrcDir); err != nil {
		t.Errorf("delete %s: %v", nrcDir, err)
	}
	if _, err := cl.Kubectl(ctx, "delete", "-f", crd, "--ignore-not-found", "--wait=true", "--timeout=60s"); err != nil {
		t.Errorf("delete the CRD: %v", err)
	}
	for _, n := range allNodes {
		if err := removeTaint(ctx, n, nrcTaint); err != nil {
			t.Errorf("node %s: remove taint %s: %v", n, nrcTaint, err)
		}
	}
}
