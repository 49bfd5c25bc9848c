package drivercases

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Diagnostics collects what a failure needs to be understood (for a person
// to read; no check reads it): the kubelet log tail and plugins_registry of
// each node, the Node and CSINode, every pod of the workload's namespace
// with its logs, and the events of that namespace and of the nodes.
func (c *workloadCluster) Diagnostics(ctx context.Context, nodes []string) string {
	return Diagnostics(ctx, c.Client, c.Node, c.Namespace, c.Selector, nodes)
}

// NodeLogs is the part of a Node that Diagnostics reads.
type NodeLogs interface {
	KubeletLog(ctx context.Context, node string, lines int) (string, error)
	PluginsRegistry(ctx context.Context, node string) ([]NodeFile, error)
}

// Diagnostics collects what a failure needs to be understood, for a person
// to read: for each of nodes, the kubelet's last 60 log lines, its
// plugins_registry, the Node (Ready, heartbeat, the node ID annotation,
// labels) and the CSINode's drivers; every pod of namespace matching
// selector ("" for all) with its containers' states and last 80 log lines
// (and the previous container's, after a restart); the events of namespace
// and of the nodes, oldest first. What cannot be read is said in its place.
func Diagnostics(ctx context.Context, client kubernetes.Interface, on NodeLogs, namespace, selector string, nodes []string) string {
	var b strings.Builder
	for _, n := range nodes {
		log, err := on.KubeletLog(ctx, n, 60)
		fmt.Fprintf(&b, "==== kubelet log of %s (last 60 lines) ====\n", n)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		b.WriteString(log)
		if files, err := on.PluginsRegistry(ctx, n); err == nil {
			fmt.Fprintf(&b, "==== %s on %s ====\n", PluginsRegistry, n)
			for _, f := range files {
				fmt.Fprintf(&b, "%s socket=%v id=%s\n", f.Name, f.Socket, f.ID())
			}
		}
		if nd, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil {
			ready, hb := NodeReady(nd)
			fmt.Fprintf(&b, "==== node %s: Ready=%v (heartbeat %s), annotation %s=%q, labels %v\n",
				n, ready, hb.Format(time.RFC3339), csiplugin.NodeIDAnnotation, nd.Annotations[csiplugin.NodeIDAnnotation], nd.Labels)
		}
		if cn, err := client.StorageV1().CSINodes().Get(ctx, n, metav1.GetOptions{}); err == nil {
			js, _ := json.Marshal(cn.Spec.Drivers)
			fmt.Fprintf(&b, "==== CSINode %s: %s\n", n, js)
		}
	}
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		fmt.Fprintf(&b, "(pods: %v)\n", err)
	} else {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "==== pod %s on %s: phase %s, Ready %v, deleting %v\n", p.Name, p.Spec.NodeName, p.Status.Phase, PodReady(&p), p.DeletionTimestamp != nil)
			for _, s := range p.Status.ContainerStatuses {
				js, _ := json.Marshal(s.State)
				fmt.Fprintf(&b, "  container %s: ready %v, restarts %d, state %s\n", s.Name, s.Ready, s.RestartCount, js)
				for _, previous := range []bool{false, true} {
					if previous && s.RestartCount == 0 {
						continue
					}
					tail := int64(80)
					raw, err := client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{
						Container: s.Name, Previous: previous, TailLines: &tail}).DoRaw(ctx)
					fmt.Fprintf(&b, "---- logs of %s/%s (previous=%v) ----\n", p.Name, s.Name, previous)
					if err != nil {
						fmt.Fprintf(&b, "(%v)\n", err)
					}
					b.Write(raw)
				}
			}
		}
	}
	fmt.Fprintf(&b, "==== events ====\n")
	var evs []corev1.Event
	for _, ns := range []string{namespace, metav1.NamespaceDefault} {
		l, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "(events of %s: %v)\n", ns, err)
			continue
		}
		for _, e := range l.Items {
			if ns == namespace || e.InvolvedObject.Kind == "Node" {
				evs = append(evs, e)
			}
		}
	}
	sort.Slice(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	for _, e := range evs {
		fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", eventTime(e).Format("15:04:05"), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, strings.TrimSpace(e.Message))
	}
	return b.String()
}

// NodeReady reports the node's Ready condition and its last heartbeat.
func NodeReady(n *corev1.Node) (bool, time.Time) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, c.LastHeartbeatTime.Time
		}
	}
	return false, time.Time{}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
