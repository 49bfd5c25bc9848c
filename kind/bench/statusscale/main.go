// Command statusscale measures `kubectl csi-registrar status` against a
// cluster of simulated nodes (`make bench-status-scale`, kind/bench/statusscale.sh):
// kwok (sigs.k8s.io/kwok) keeps N fake Nodes Ready against the local node's
// real API server and runs the pods the DaemonSet controller places on them;
// this program creates the Nodes, a node plugin DaemonSet and a CSIDriver,
// writes a CSINode entry and the Node annotation for every node (as the
// kubelet would), runs the plugin (all registered, then with a share of the
// nodes not registered) and prints wall time, API requests and the plugin's
// peak RSS. -cleanup-only removes everything a run created and checks it is
// gone; statusscale.sh runs it after every run, once kwok is stopped.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

const (
	namespace  = "csi-status-scale"
	dsName     = "scale-node-plugin"
	driver     = "scale.csi-registrar.example.com"
	nodePrefix = "kwok-scale-"
	// The label and annotation kwok manages nodes by, and the taint that
	// keeps other pods off them.
	kwokKey   = "kwok.x-k8s.io/node"
	kwokValue = "fake"
	ownLabel  = "csi-registrar.example.com/status-scale"
)

func main() {
	var (
		kubeconfig, plugin string
		nodes, workers     int
		notRegistered      float64
		runs               int
		timeout            time.Duration
		cleanupOnly        bool
	)
	flag.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's admin kubeconfig")
	flag.StringVar(&plugin, "plugin", "bin/kubectl-csi_registrar", "the plugin binary to measure")
	flag.IntVar(&nodes, "nodes", 5000, "simulated nodes")
	flag.Float64Var(&notRegistered, "not-registered", 1, "percent of nodes not registered in the second measurement")
	flag.IntVar(&runs, "runs", 3, "runs of the plugin per measurement")
	flag.IntVar(&workers, "workers", 32, "concurrent API writes while setting up")
	flag.DurationVar(&timeout, "timeout", 40*time.Minute, "the whole run")
	flag.BoolVar(&cleanupOnly, "cleanup-only", false, "remove what a run created, and nothing else (statusscale.sh runs it after every run, once kwok is stopped: kwok recreates the leases of nodes deleted under it)")
	flag.Parse()
	if nodes < 1 || notRegistered < 0 || notRegistered > 100 || runs < 1 || workers < 1 {
		fmt.Fprintf(os.Stderr, "statusscale: -nodes=%d -not-registered=%v -runs=%d -workers=%d: want nodes, runs and workers ≥ 1 and 0 ≤ not-registered ≤ 100\n", nodes, notRegistered, runs, workers)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "statusscale: -kubeconfig=%q: %v\n", kubeconfig, err)
		os.Exit(2)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "statusscale:", err)
		os.Exit(2)
	}
	s := &scale{client: client, kubeconfig: kubeconfig, plugin: plugin, nodes: nodes, workers: workers}
	run := func() error { return s.run(ctx, notRegistered, runs) }
	if cleanupOnly {
		run = func() error { return s.cleanup(ctx) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "statusscale:", err)
		os.Exit(1)
	}
}

type scale struct {
	client             kubernetes.Interface
	kubeconfig, plugin string
	nodes, workers     int
}

func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func nodeName(i int) string { return fmt.Sprintf("%s%05d", nodePrefix, i) }

func (s *scale) run(ctx context.Context, notRegistered float64, runs int) error {
	t0 := time.Now()
	if err := s.createPlugin(ctx); err != nil {
		return err
	}
	if err := s.parallel(ctx, "create Nodes and CSINodes", s.nodes, func(ctx context.Context, i int) error { return s.createNode(ctx, i) }); err != nil {
		return err
	}
	logf("%d Nodes with CSINode entries and annotations written in %s", s.nodes, time.Since(t0).Round(time.Second))
	if err := s.waitPods(ctx); err != nil {
		return err
	}
	logf("set-up done in %s", time.Since(t0).Round(time.Second))

	results := []result{}
	results = append(results, s.measure(ctx, "all registered", runs, 0, nil))
	// The share not registered: the kubelet's view of those nodes removed.
	n := int(float64(s.nodes) * notRegistered / 100)
	var off []int
	for i := 0; i < n; i++ {
		off = append(off, i*s.nodes/max(n, 1))
	}
	for _, i := range off {
		if err := s.unregister(ctx, nodeName(i)); err != nil {
			return err
		}
	}
	label := fmt.Sprintf("%v%% (%d) not registered", notRegistered, n)
	results = append(results, s.measure(ctx, label, runs, n, nil))
	results = append(results, s.measure(ctx, label+", --no-proxy", runs, n, []string{"--no-proxy"}))
	fmt.Printf("\n%d simulated nodes (kwok), %d plugin runs each; median (min–max)\n", s.nodes, runs)
	fmt.Printf("| case | exit | wall s | API requests (lists / proxy / other) | peak RSS MiB |\n|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Println(r)
	}
	for _, r := range results {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// createPlugin creates the namespace, the CSIDriver and a node plugin
// DaemonSet shaped as manifests/ (csi-registrar's image and arguments, the
// plugins_registry hostPath) for the simulated nodes only.
func (s *scale) createPlugin(ctx context.Context) error {
	labels := map[string]string{ownLabel: "true"}
	if _, err := s.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := s.client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	podLabels := map[string]string{"app": dsName}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: dsName, Namespace: namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: podLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"type": "kwok"},
					// Every taint, as manifests/ does: kwok's, and the
					// not-ready ones of nodes kwok has not (or no longer)
					// marked Ready, so that scheduling does not wait on it.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{
						{Name: "driver", Image: "csi-registrar:dev", Command: []string{"/csi-registrar", "driver"},
							Args:         []string{"--endpoint=unix:///csi/csi.sock", "--driver-name=" + driver, "--node-id=$(KUBE_NODE_NAME)"},
							VolumeMounts: []corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"}}},
						{Name: "registrar", Image: "csi-registrar:dev",
							Args:         []string{"--csi-address=/csi/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/" + driver + "/csi.sock", "--http-endpoint=:9809"},
							VolumeMounts: []corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"}, {Name: "registration-dir", MountPath: "/registration"}}},
					},
					Volumes: []corev1.Volume{
						{Name: "socket-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/plugins/" + driver}}},
						{Name: "registration-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/plugins_registry"}}},
					},
				},
			},
		},
	}
	_, err := s.client.AppsV1().DaemonSets(namespace).Create(ctx, ds, metav1.CreateOptions{})
	return err
}

// createNode creates a simulated Node kwok keeps Ready, with the node ID
// annotation, and its CSINode with the driver's entry, as the kubelet writes them.
func (s *scale) createNode(ctx context.Context, i int) error {
	name := nodeName(i)
	ann, _ := json.Marshal(map[string]string{driver: name})
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"type": "kwok", ownLabel: "true", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
				"kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{kwokKey: kwokValue, "node.alpha.kubernetes.io/ttl": "0", csiplugin.NodeIDAnnotation: string(ann)}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: kwokKey, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			// Loopback only: the API server refuses to proxy there, and
			// kwok keeps addresses it finds.
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: "localhost"}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	created, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	cn := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ownLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: created.UID}}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: name}}},
	}
	_, err = s.client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{})
	return err
}

// unregister removes the driver from a node's CSINode and annotation, as
// the kubelet does when the registration goes.
func (s *scale) unregister(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, csiplugin.NodeIDAnnotation)
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	cn, err := s.client.StorageV1().CSINodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cn.Spec.Drivers = nil
	_, err = s.client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{})
	return err
}

// waitPods waits until the DaemonSet has a pod on every simulated node.
func (s *scale) waitPods(ctx context.Context) error {
	t0 := time.Now()
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		ds, err := s.client.AppsV1().DaemonSets(namespace).Get(ctx, dsName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := ds.Status
		now := fmt.Sprintf("DaemonSet: desired %d, scheduled %d, ready %d", st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady)
		if now != last {
			logf("%s (%s)", now, time.Since(t0).Round(time.Second))
			last = now
		}
		// A pod bound to every node, Ready or not: the answer counts a node
		// plugin pod on the node, and on 2 cores kwok cannot keep 5000
		// nodes Ready (the DaemonSet's counts then drop as nodes flap).
		pods, err := s.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := map[string]bool{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound[p.Spec.NodeName] = true
			}
		}
		return len(bound) >= s.nodes, nil
	})
	if err != nil {
		return fmt.Errorf("the DaemonSet's pods on %d simulated nodes: %v (last: %s)", s.nodes, err, last)
	}
	logf("%d node plugin pods scheduled in %s", s.nodes, time.Since(t0).Round(time.Second))
	return nil
}

// parallel runs f for every index below n with s.workers at a time, and
// returns the first error (what and the index in it).
func (s *scale) parallel(ctx context.Context, what string, n int, f func(context.Context, int) error) error {
	idx := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	done := 0
	for w := 0; w < s.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				err := f(ctx, i)
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("%s: %d: %w", what, i, err)
				}
				done++
				if done%1000 == 0 {
					logf("%s: %d/%d", what, done, n)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case <-ctx.Done():
		}
	}
	close(idx)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// result is one measurement: runs of the plugin.
type result struct {
	what                       string
	codes                      []int
	wall                       []float64
	total, lists, proxy, other []int
	rss                        []float64 // MiB
	err                        error
}

func (r result) String() string {
	if len(r.wall) == 0 {
		return fmt.Sprintf("| %s | error: %v | | | |", r.what, r.err)
	}
	return fmt.Sprintf("| %s | %v | %s | %d (%d / %d / %d) | %s |", r.what, r.codes, spread(r.wall, "%.2f"),
		median(r.total), median(r.lists), median(r.proxy), median(r.other), spread(r.rss, "%.0f"))
}

var statsRE = regexp.MustCompile(`api requests: (\d+) \(lists (\d+), proxy (\d+), other (\d+)\); wall ([0-9.]+)s`)

// measure runs the plugin runs times: `status DRIVER -o json --stats`.
func (s *scale) measure(ctx context.Context, what string, runs, wantNotRegistered int, extra []string) result {
	r := result{what: what}
	for i := 0; i < runs; i++ {
		// The driver named: other DaemonSets that tolerate every taint
		// (manifests/' own) also place pods on the simulated nodes, and are
		// not registered there; their rows are not what is measured.
		args := append([]string{"status", driver, "--kubeconfig", s.kubeconfig, "-o", "json", "--stats"}, extra...)
		cmd := exec.CommandContext(ctx, s.plugin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t0 := time.Now()
		out, err := cmd.Output()
		wall := time.Since(t0).Seconds()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			r.err = fmt.Errorf("%s: %v", what, err)
			return r
		}
		var rep struct {
			Drivers []struct {
				Name                                string
				Expected, Registered, NotRegistered int
			}
			Unknown []json.RawMessage
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			r.err = fmt.Errorf("%s: the plugin's output is not its JSON report: %v; stderr: %s", what, err, stderr.String())
			return r
		}
		for _, d := range rep.Drivers {
			if d.Name == driver && (d.Expected != s.nodes || d.NotRegistered != wantNotRegistered || d.Registered != s.nodes-wantNotRegistered) {
				r.err = fmt.Errorf("%s: %s expected %d, registered %d, not registered %d; want %d, %d, %d",
					what, driver, d.Expected, d.Registered, d.NotRegistered, s.nodes, s.nodes-wantNotRegistered, wantNotRegistered)
			}
		}
		m := statsRE.FindStringSubmatch(stderr.String())
		if m == nil {
			r.err = fmt.Errorf("%s: no --stats line on stderr: %q", what, stderr.String())
			return r
		}
		atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
		r.codes = append(r.codes, code)
		r.wall = append(r.wall, wall)
		r.total, r.lists, r.proxy, r.other = append(r.total, atoi(m[1])), append(r.lists, atoi(m[2])), append(r.proxy, atoi(m[3])), append(r.other, atoi(m[4]))
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.rss = append(r.rss, float64(ru.Maxrss)/1024) // Maxrss is in KiB on Linux
		}
		logf("%s, run %d: exit %d, %.2f s, %s requests, %d unknown parts", what, i+1, code, wall, m[1], len(rep.Unknown))
	}
	return r
}

func median(v []int) int {
	s := append([]int{}, v...)
	sort.Ints(s)
	return s[len(s)/2]
}

func spread(v []float64, f string) string {
	s := append([]float64{}, v...)
	sort.Float64s(s)
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s[len(s)/2], s[0], s[len(s)-1])
}

// cleanup removes everything run created (found by name and label, so it
// also cleans after an interrupted run) and checks it is gone.
func (s *scale) cleanup(ctx context.Context) error {
	t0 := time.Now()
	bg := metav1.DeletePropagationBackground
	if err := s.client.AppsV1().DaemonSets(namespace).Delete(ctx, dsName, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// The pods first, at once (grace period 0): ours and those of other
	// DaemonSets that tolerate every taint (manifests/' does), all on
	// simulated nodes, where kwok, on 2 cores, finishes graceful deletions
	// at about 700 a minute.
	if err := s.deletePods(ctx); err != nil {
		return err
	}
	// One object at a time, s.workers at once: a delete-collection of
	// thousands can outlive its request and leave some behind. The Node
	// leases kwok wrote and the events the controllers wrote about the
	// nodes go too: left in etcd they slow the next user of the node.
	sel := metav1.ListOptions{LabelSelector: ownLabel + "=true"}
	for _, d := range []struct {
		what string
		del  func(context.Context, string) error
	}{
		{"CSINodes", func(ctx context.Context, n string) error {
			return s.client.StorageV1().CSINodes().Delete(ctx, n, metav1.DeleteOptions{})
		}},
		{"Nodes", func(ctx context.Context, n string) error {
			return s.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		}},
		{"node Leases", func(ctx context.Context, n string) error {
			return s.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, n, metav1.DeleteOptions{})
		}},
	} {
		if err := s.parallel(ctx, "delete "+d.what, s.nodes, func(ctx context.Context, i int) error {
			if err := d.del(ctx, nodeName(i)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := s.deleteNodeEvents(ctx); err != nil {
		return err
	}
	// Again, now that the nodes are gone: a DaemonSet that tolerates every
	// taint may have placed pods there meanwhile, which no kubelet would
	// ever finish.
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		left, err := s.simulatedPods(ctx)
		if err != nil || len(left) == 0 {
			return len(left) == 0, err
		}
		return false, s.deletePods(ctx)
	})
	if err != nil {
		return fmt.Errorf("pods on the simulated nodes: %w", err)
	}
	if err := s.client.StorageV1().CSIDrivers().Delete(ctx, driver, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := s.client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := s.client.CoreV1().Nodes().List(ctx, sel)
		if err != nil {
			return false, err
		}
		csinodes, err := s.client.StorageV1().CSINodes().List(ctx, sel)
		if err != nil {
			return false, err
		}
		_, nsErr := s.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		leases, err := s.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			if strings.HasPrefix(l.Name, nodePrefix) {
				return false, nil
			}
		}
		return len(nodes.Items) == 0 && len(csinodes.Items) == 0 && apierrors.IsNotFound(nsErr), nil
	})
	if err != nil {
		return fmt.Errorf("what statusscale created is not all gone: %v", err)
	}
	logf("removed everything statusscale created in %s", time.Since(t0).Round(time.Second))
	return nil
}

// simulatedPods lists the pods on the simulated nodes and those of our
// namespace, in every namespace.
func (s *scale) simulatedPods(ctx context.Context) ([]types.NamespacedName, error) {
	var names []types.NamespacedName
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return s.client.CoreV1().Pods("").List(ctx, o)
	}))
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		if pod := o.(*corev1.Pod); strings.HasPrefix(pod.Spec.NodeName, nodePrefix) || pod.Namespace == namespace {
			names = append(names, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
		return nil
	})
	return names, err
}

// deletePods deletes the pods simulatedPods lists, with grace period 0: no
// kubelet runs them.
func (s *scale) deletePods(ctx context.Context) error {
	pods, err := s.simulatedPods(ctx)
	if err != nil {
		return err
	}
	zero := int64(0)
	if err := s.deleteAll(ctx, "pods on the simulated nodes", pods, func(ctx context.Context, n types.NamespacedName) error {
		return s.client.CoreV1().Pods(n.Namespace).Delete(ctx, n.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}); err != nil {
		return err
	}
	logf("deleted %d pods on the simulated nodes", len(pods))
	return nil
}

// deleteNodeEvents deletes the events about the simulated nodes (the node
// lifecycle controller's, kwok's), in every namespace.
func (s *scale) deleteNodeEvents(ctx context.Context) error {
	var names []types.NamespacedName
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return s.client.CoreV1().Events("").List(ctx, o)
	}))
	err := p.EachListItem(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"}, func(o runtime.Object) error {
		if e := o.(*corev1.Event); strings.HasPrefix(e.InvolvedObject.Name, nodePrefix) {
			names = append(names, types.NamespacedName{Namespace: e.Namespace, Name: e.Name})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("events of the simulated nodes: %w", err)
	}
	if err := s.deleteAll(ctx, "events of the simulated nodes", names, func(ctx context.Context, n types.NamespacedName) error {
		return s.client.CoreV1().Events(n.Namespace).Delete(ctx, n.Name, metav1.DeleteOptions{})
	}); err != nil {
		return err
	}
	logf("deleted %d events of the simulated nodes", len(names))
	return nil
}

// deleteAll deletes the objects named, s.workers at a time; an object
// already gone is no error.
func (s *scale) deleteAll(ctx context.Context, what string, names []types.NamespacedName, del func(context.Context, types.NamespacedName) error) error {
	return s.parallel(ctx, "delete "+what, len(names), func(ctx context.Context, i int) error {
		if err := del(ctx, names[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		return nil
	})
}
