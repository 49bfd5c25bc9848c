package storagee2e

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

// waitRegistered waits until the kubelet of every node the suite's pods may
// land on (Ready, schedulable, without a NoSchedule or NoExecute taint)
// has the definition's driver registered (csiplugin's rule), for at most
// timeout. After it, a driver registered on some nodes only is logged and
// the run goes on (its node plugin may select nodes); one registered
// nowhere is a *NotRegisteredError.
func waitRegistered(ctx context.Context, client kubernetes.Interface, def *Definition, timeout time.Duration, log logr.Logger) error {
	driver := def.DriverInfo.Name
	start := time.Now()
	var registered, missing, all []string
	for {
		var err error
		registered, missing, all, err = registration(ctx, client, driver)
		if err == nil && len(registered) > 0 && len(missing) == 0 {
			log.Info("The driver is registered", "driver", driver, "nodes", registered, "after", time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(start) >= timeout {
			if err != nil {
				return err
			}
			if len(registered) == 0 {
				return &NotRegisteredError{Driver: driver, Definition: def.Path(), Waited: timeout, Nodes: all}
			}
			log.Info("The driver is not registered on every node the suite's pods may land on: a spec whose pod lands there fails",
				"driver", driver, "registered", registered, "notRegistered", missing, "waited", timeout)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// registration lists the nodes whose kubelet has driver registered, the
// nodes the suite's pods may land on that have not, and every node.
func registration(ctx context.Context, client kubernetes.Interface, driver string) (registered, missing, all []string, err error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	csinodes, err := client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	byName := map[string]*storagev1.CSINode{}
	for i := range csinodes.Items {
		byName[csinodes.Items[i].Name] = &csinodes.Items[i]
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		all = append(all, n.Name)
		// The one rule (csiplugin.Registration.Registered): the CSINode
		// entry and the Node annotation, with the same node ID.
		if r, err := drivercases.RegistrationOf(n, byName[n.Name], driver); err == nil && r.Registered() {
			registered = append(registered, n.Name)
		} else if schedulable(n) {
			missing = append(missing, n.Name)
		}
	}
	slices.Sort(registered)
	slices.Sort(missing)
	slices.Sort(all)
	return registered, missing, all, nil
}

// schedulable reports whether a test pod without tolerations may land on n.
func schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
