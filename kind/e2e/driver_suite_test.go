//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/kind/e2e/driverspec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The driver suite (`make e2e-driver DRIVER=...`, or `go test -tags e2e
// ./kind/e2e -driver=...`): the registration cases that make sense for any
// CSI driver, run against the driver's own manifests with csi-registrar in
// place of node-driver-registrar. With -driver, TestMain deploys those
// manifests instead of manifests/ and only TestDriver runs.
//
// Environment: E2E_REGISTRAR_IMAGE, the image name of the csi-registrar
// image under test, as the nodes know it once E2E_IMAGE_ARCHIVE is loaded
// (default csi-registrar:dev, what `make image` builds).
var (
	driverFlag = flag.String("driver", "",
		"the driver to test: a kustomize directory or a manifest file (relative paths: from the repository root)")
	driverImagesFlag = flag.String("driver-images", "",
		"comma-separated image archives (docker-archive or OCI) the driver's manifests need, loaded into every node")
	registrarImageFlag = flag.String("registrar-image", "",
		"the csi-registrar image that replaces node-driver-registrar (default $E2E_REGISTRAR_IMAGE, else csi-registrar:dev)")
	driverRegisterWait = flag.Duration("driver-register-timeout", time.Minute,
		"how long case 1 waits for the kubelet to register the driver once its pods run")
	registrarLogsFlag = flag.String("registrar-logs", "keep",
		"keep, or blocked: every read of the registrar container's log through the API fails while the suite runs (CI runs the suite so: no verdict may rest on a registrar's logs)")
	registrarArchiveFlag = flag.String("registrar-archive", "",
		"an image archive of another registrar (e.g. upstream node-driver-registrar): loaded into the nodes, its image replaces node-driver-registrar (overrides -registrar-image)")
)

// dut is the driver under test; nil without -driver.
var dut *driverUnderTest

// driverUnderTest is what the driver suite learned from the driver's
// manifests and from the nodes.
type driverUnderTest struct {
	spec     *driverspec.Spec
	manifest string // the manifests as applied (registrar image swapped)
	name     string // the driver name the kubelet registers
	nameFrom string
	nodes    []string   // the nodes where a pod of its workload runs, sorted (updated as pods move)
	dialer   NodeDialer // nil: the provider cannot dial the nodes' sockets
	// driver is the container whose process listens on the driver's socket
	// on the node (found on the node: sockowner), registrar the container
	// that registers it: the spec's registrar, else the driver (in-process).
	driver, registrar string
	// driverErr says why no driver container was found (case 5 fails with it).
	driverErr error

	// Set by the setup for case 1: the time of `kubectl apply` and the
	// CSINode recorders started before it.
	applied time.Time
	cnRecs  map[string]*Recorder
}

func (d *driverUnderTest) regSocket() string { return d.name + "-reg.sock" }

// resolve makes a path of a flag absolute: relative ones are taken from the
// repository root (`go test` runs in the package's directory).
func resolve(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// runDriverSuite is TestMain's part for -driver, once the cluster is up.
func runDriverSuite(ctx context.Context, m *testing.M, root string) int {
	defer func() {
		if dut != nil {
			for _, r := range dut.cnRecs {
				r.Stop()
			}
		}
	}()
	if err := driverSetup(ctx, root); err != nil {
		logf("driver setup failed: %v", err)
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		fmt.Println(cl.Diagnostics(dctx, allNodes))
		return 1
	}
	// Only the driver cases: the project's own cases need manifests/.
	if f := flag.Lookup("test.run"); f != nil && !strings.HasPrefix(f.Value.String(), "TestDriver") && !strings.HasPrefix(f.Value.String(), "^TestDriver") {
		if err := f.Value.Set("^TestDriver$"); err != nil {
			logf("%v", err)
			return 1
		}
	}
	code := m.Run()
	printTimings()
	fmt.Print(driverTable([]driverRun{results}))
	if err := writeDriverResults(); err != nil {
		logf("%v", err)
		return 1
	}
	return code
}

// driverSetup loads the images, renders the driver's manifests, swaps the
// registrar image, starts from a clean slate (the driver's objects deleted)
// and applies them, then waits until every pod of the DaemonSet is Ready.
// Whether the kubelet registers the driver is case 1's question.
func driverSetup(ctx context.Context, root string) error {
	src := resolve(root, *driverFlag)
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("-driver=%s: %w (want a kustomize directory or a manifest file)", *driverFlag, err)
	}
	image := *registrarImageFlag
	if image == "" {
		image = os.Getenv("E2E_REGISTRAR_IMAGE")
	}
	if image == "" {
		image = "csi-registrar:dev"
	}
	archives := []string{os.Getenv("E2E_IMAGE_ARCHIVE")}
	if archives[0] == "" {
		archives[0] = filepath.Join(root, "bin", "image.tar")
	}
	if a := *registrarArchiveFlag; a != "" {
		a = resolve(root, a)
		if image, err = ArchiveImage(a); err != nil {
			return fmt.Errorf("-registrar-archive: %w", err)
		}
		archives = append(archives, a)
	}
	for _, a := range strings.Split(*driverImagesFlag, ",") {
		if a = strings.TrimSpace(a); a != "" {
			archives = append(archives, resolve(root, a))
		}
	}
	for i, a := range archives {
		if _, err := os.Stat(a); err != nil {
			if i == 0 {
				return fmt.Errorf("csi-registrar image archive: %w (run `make image`, or set E2E_IMAGE_ARCHIVE)", err)
			}
			return fmt.Errorf("-driver-images: %w", err)
		}
		t := time.Now()
		if err := cl.Provider.LoadImage(ctx, a); err != nil {
			return err
		}
		logf("loaded %s in %s", a, time.Since(t).Round(100*time.Millisecond))
	}

	// Render: kustomize for a directory, the file as it is otherwise.
	var rendered []byte
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(src, "kustomization.yaml")); err != nil {
			if _, err2 := os.Stat(filepath.Join(src, "kustomization.yml")); err2 != nil {
				if _, err3 := os.Stat(filepath.Join(src, "Kustomization")); err3 != nil {
					return fmt.Errorf("-driver=%s is a directory without a kustomization.yaml: pass a kustomize directory or a manifest file", *driverFlag)
				}
			}
		}
		out, err := cl.Kubectl(ctx, "kustomize", src)
		if err != nil {
			return err
		}
		rendered = []byte(out)
	} else if rendered, err = os.ReadFile(src); err != nil {
		return err
	}
	spec, err := driverspec.Parse(rendered, image)
	if err != nil {
		return fmt.Errorf("-driver=%s: %w", *driverFlag, err)
	}
	d := &driverUnderTest{spec: spec, name: spec.DriverName, nameFrom: spec.DriverNameFrom, cnRecs: map[string]*Recorder{}}
	d.dialer, _ = cl.Provider.(NodeDialer)
	for _, sw := range spec.Swaps {
		logf("replaced: %s (args as written)", sw)
	}
	for _, p := range spec.Problems() {
		logf("warning: %s", p)
	}
	y, err := spec.YAML()
	if err != nil {
		return err
	}
	d.manifest = filepath.Join(root, "bin", "e2e", "driver-manifests.yaml")
	if err := os.MkdirAll(filepath.Dir(d.manifest), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(d.manifest, y, 0o644); err != nil {
		return err
	}
	logf("manifests as applied: %s", d.manifest)

	w := spec.Workload
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return fmt.Errorf("%s: selector: %w", w, err)
	}
	cl.Namespace, cl.DaemonSet, cl.Selector, cl.MetricsPort = spec.Namespace, w.Name, sel.String(), spec.HTTPPort
	results.Registrar, results.Driver = image, *driverFlag
	if spec.Registrar == "" {
		results.Registrar = "in-process"
	}
	results.Provider = cl.Provider.Name()
	if v, err := cl.Client.Discovery().ServerVersion(); err == nil {
		results.Kubernetes = v.GitVersion
	}

	if allNodes, err = cl.NodeNames(ctx); err != nil {
		return err
	}

	// A clean slate: nothing of the driver's deployed, and no socket of it
	// left in plugins_registry by a killed registrar of an earlier run.
	t := time.Now()
	if _, err := cl.Kubectl(ctx, "delete", "-f", d.manifest, "--ignore-not-found", "--wait=true", "--timeout=180s"); err != nil {
		return err
	}
	if d.name != "" {
		for _, n := range allNodes {
			files, err := cl.Provider.PluginsRegistry(ctx, n)
			if err != nil {
				return err
			}
			for _, f := range files {
				if strings.HasPrefix(f.Name, d.name) {
					logf("node %s: removing %s/%s, left behind by an earlier run", n, PluginsRegistry, f.Name)
					if err := cl.Provider.RemoveFile(ctx, n, PluginsRegistry+"/"+f.Name); err != nil {
						return err
					}
				}
			}
		}
		if err := waitDriverUnregistered(ctx, d.name, allNodes, 30*time.Second); err != nil {
			// No socket of the driver is left, yet the API says registered:
			// the kubelet lost it (e.g. the node was restarted with a
			// registrar that leaked its socket) and will never remove it.
			logf("%v: removing the stale registration through the API", err)
			for _, n := range allNodes {
				if err := clearRegistration(ctx, n, d.name); err != nil {
					return err
				}
			}
			if err := waitDriverUnregistered(ctx, d.name, allNodes, 30*time.Second); err != nil {
				return err
			}
		}
	}
	logf("clean slate (the driver's objects deleted) in %s", time.Since(t).Round(100*time.Millisecond))

	before := map[string]map[string]bool{} // node -> socket IDs before the apply
	for _, n := range allNodes {
		files, err := cl.Provider.PluginsRegistry(ctx, n)
		if err != nil {
			return err
		}
		before[n] = map[string]bool{}
		for _, f := range files {
			before[n][f.ID()] = true
		}
		r, err := cl.RecordCSINode(ctx, n)
		if err != nil {
			return err
		}
		d.cnRecs[n] = r
	}
	pods, err := cl.RecordPods(ctx)
	if err != nil {
		return err
	}
	defer pods.Stop()
	d.applied = time.Now()
	if _, err := cl.Kubectl(ctx, "apply", "-f", d.manifest); err != nil {
		return err
	}
	if err := waitPodsReady(ctx, spec.Workload, 3*time.Minute); err != nil {
		return err
	}
	if err := d.updateNodes(ctx); err != nil {
		return err
	}
	for _, n := range d.nodes {
		_, ev, err := pods.Await(ctx, 0, time.Second, "pod Ready on "+n, func(s State) bool {
			for _, p := range s.Pods() {
				if p.Spec.NodeName == n && PodReady(p) {
					return true
				}
			}
			return false
		})
		if err == nil {
			record("setup", "kubectl apply -> pod Ready on "+n, ev.At.Sub(d.applied))
		}
	}

	if d.name == "" || spec.RegistrationPath == "" || strings.Contains(spec.RegistrationPath, "$(") {
		if err := d.learnName(ctx, before); err != nil {
			return err
		}
	}
	wpods, err := cl.Pods(ctx)
	if err != nil {
		return err
	}
	if err := d.findDriver(ctx, wpods); err != nil {
		// Case 1 still tells whether and why the kubelet registers the
		// driver; case 5, which kills the driver container, fails with this.
		d.driverErr = err
		logf("%v", err)
	}
	if *registrarLogsFlag == "blocked" {
		if err := blockLogs(d.registrar); err != nil {
			return err
		}
	} else if *registrarLogsFlag != "keep" {
		return fmt.Errorf("-registrar-logs=%s: want keep or blocked", *registrarLogsFlag)
	}
	dut = d
	logf("driver %s (from %s); %s on %v (moves: %v): registrar container %s, driver container %q (its process listens on the driver's socket); --csi-address=%s, --kubelet-registration-path=%s; HTTP endpoint: %s; node sockets dialable: %v",
		d.name, d.nameFrom, w, d.nodes, w.Moves(), orInProcess(spec.Registrar), d.driver, spec.CSIAddress, spec.RegistrationPath,
		orNone(spec.HTTPPort), d.dialer != nil)
	return nil
}

func orInProcess(s string) string {
	if s == "" {
		return "none (the driver registers in-process)"
	}
	return s
}

// updateNodes sets d.nodes to the nodes where a pod of the workload runs.
func (d *driverUnderTest) updateNodes(ctx context.Context) error {
	pm, err := cl.Pods(ctx)
	if err != nil {
		return err
	}
	d.nodes = d.nodes[:0]
	for n := range pm {
		d.nodes = append(d.nodes, n)
	}
	sort.Strings(d.nodes)
	return nil
}

// findDriver learns the driver container on every node from what runs: the
// container whose process listens on the CSI socket the registrar dials
// (its --csi-address, on the node), or, without a registrar container or
// when that is not on a hostPath, the socket announced to the kubelet, in
// pods, the workload's pods by node. It must be the same container on every
// node; the error of a node where none is found names what was tried.
func (d *driverUnderTest) findDriver(ctx context.Context, pods map[string]*corev1.Pod) error {
	d.registrar = d.spec.Registrar
	sock, what := d.spec.HostSocket, "the registrar's --csi-address="+d.spec.CSIAddress+" on the node"
	if sock == "" {
		sock, what = d.spec.RegistrationPath, "the driver's socket the kubelet is told (GetInfo's endpoint)"
	}
	for _, n := range d.nodes {
		c, err := cl.SocketOwner(ctx, pods[n], sock)
		if err != nil {
			return fmt.Errorf("the driver container (the one listening on %s): %w", what, err)
		}
		if d.driver != "" && c != d.driver {
			return fmt.Errorf("the driver container: %s listens on %s on node %s, %s on %s", c, sock, n, d.driver, d.nodes[0])
		}
		d.driver = c
	}
	if d.registrar == "" {
		d.registrar = d.driver
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return ":" + s
}

// learnName asks the registration sockets that appeared since the apply
// (GetInfo, as the kubelet does) which one announces the driver's socket
// (--kubelet-registration-path), and takes its name.
func (d *driverUnderTest) learnName(ctx context.Context, before map[string]map[string]bool) error {
	if d.dialer == nil {
		return fmt.Errorf("the manifests do not say the driver's name and socket (--driver-name or one CSIDriver object; a registrar's --kubelet-registration-path) and provider %s cannot dial the node's registration socket to ask it (GetInfo): run on the local node",
			cl.Provider.Name())
	}
	n := d.nodes[0]
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, *driverRegisterWait, true, func(ctx context.Context) (bool, error) {
		files, err := cl.Provider.PluginsRegistry(ctx, n)
		if err != nil {
			return false, err
		}
		seen = nil
		for _, f := range files {
			if !f.Socket || before[n][f.ID()] {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			info, err := RegistrationInfo(cctx, d.dialer, n, PluginsRegistry+"/"+f.Name)
			cancel()
			if err != nil {
				seen = append(seen, fmt.Sprintf("%s: %v", f.Name, err))
				continue
			}
			seen = append(seen, fmt.Sprintf("%s: name %q, endpoint %q", f.Name, info.Name, info.Endpoint))
			want := d.spec.RegistrationPath
			if d.name != "" && info.Name == d.name || want == "" || strings.Contains(want, "$(") {
				want = info.Endpoint // in-process, or set from a field: the socket tells
			}
			if info.Endpoint == want && (d.name == "" || info.Name == d.name) {
				if d.name == "" {
					d.name, d.nameFrom = info.Name, "GetInfo on "+PluginsRegistry+"/"+f.Name+" on "+n
				}
				d.spec.RegistrationPath = info.Endpoint
				if d.spec.RegistrationPath == "" { // empty Endpoint: this same socket
					d.spec.RegistrationPath = PluginsRegistry + "/" + f.Name
				}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the manifests do not name the driver, and no new registration socket on %s announced --kubelet-registration-path=%s within %s (new sockets: %q): is the registrar running (its log)?",
			n, d.spec.RegistrationPath, *driverRegisterWait, seen)
	}
	return nil
}

// waitPodsReady waits until the workload is rolled out and each of its pods
// is Ready. Readiness is the manifests' own (upstream layouts have no
// readiness probe: Ready means running); registration is not waited for.
func waitPodsReady(ctx context.Context, w driverspec.Workload, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		want := int(w.Replicas)
		gen := ""
		if w.Kind == "DaemonSet" {
			ds, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			st := ds.Status
			last = fmt.Sprintf("DaemonSet generation %d (observed %d): desired %d, updated %d, ready %d",
				ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady)
			if st.ObservedGeneration < ds.Generation || st.DesiredNumberScheduled == 0 ||
				st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled {
				return false, nil
			}
			want, gen = int(st.DesiredNumberScheduled), strconv.FormatInt(ds.Generation, 10)
		}
		pods, err := cl.Pods(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for n, p := range pods {
			if !PodReady(p) || gen != "" && p.Labels["pod-template-generation"] != gen {
				last = fmt.Sprintf("pod %s on %s: Ready %v; %s", p.Name, n, PodReady(p), waitingReasons(p))
				return false, nil
			}
		}
		if len(pods) != want {
			last = fmt.Sprintf("%d pods of %s Ready on a node, want %d", len(pods), w, want)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s: pods not Ready after %s: %w: %s", w, timeout, err, last)
	}
	return nil
}

// waitingReasons summarises why a pod's containers are not running.
func waitingReasons(p *corev1.Pod) string {
	var out []string
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case s.State.Waiting != nil:
			out = append(out, fmt.Sprintf("container %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Terminated != nil:
			out = append(out, fmt.Sprintf("container %s terminated: %s (exit %d) %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message))
		case !s.Ready:
			out = append(out, fmt.Sprintf("container %s not ready", s.Name))
		}
	}
	if len(out) == 0 {
		return "containers running"
	}
	return strings.Join(out, "; ")
}

// blockLogs replaces the suite's client with one whose every request for the
// log of container fails: no check can then rest on a registrar's log.
func blockLogs(container string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.Provider.Kubeconfig())
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return logBlocker{rt: rt, container: container}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cl.Client = cs
	logf("-registrar-logs=blocked: every read of container %s's log through the API fails", container)
	return nil
}

type logBlocker struct {
	rt        http.RoundTripper
	container string
}

func (b logBlocker) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/log") && req.URL.Query().Get("container") == b.container {
		return nil, fmt.Errorf("the log of container %s is blocked (-registrar-logs=blocked)", b.container)
	}
	return b.rt.RoundTrip(req)
}
