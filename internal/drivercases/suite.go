package drivercases

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/record"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Waits of the cases.
const (
	shortWait = 30 * time.Second // the kubelet reacting to a socket, a pod status change
	podWait   = 90 * time.Second // a pod deleted and replaced, a kubelet restart
)

// Options say what Run runs.
type Options struct {
	// Manifests names the driver's manifests as given (the table's driver).
	Manifests string
	// Rendered are the manifests rendered (`kubectl kustomize` for a
	// directory), YAML documents.
	Rendered []byte
	// RegistrarImage replaces the image of every node-driver-registrar
	// container.
	RegistrarImage string
	// RegisterTimeout is how long case 1 waits for the kubelet to register
	// the driver once its pods run (default 1 min).
	RegisterTimeout time.Duration
	// Nodes, when set, keeps the workload's pods on these nodes (a required
	// node affinity); the faults of cases 2-5 happen on the first node of
	// them where a pod runs.
	Nodes []string
	// LabelKey and LabelValue, when set, label every object applied, so
	// that what Run applied can be found again.
	LabelKey, LabelValue string
	// Applied is the file the manifests are written to as applied.
	Applied string
	// Out receives the progress and the cases' logs.
	Out io.Writer
	// WorkloadImage is the image of the pods with a CSI inline volume that
	// the rollout case starts (it runs `sleep`: busybox, as the node pod's
	// image); empty: the rollout case measures the registration only.
	WorkloadImage string
	// Cases are the cases to run besides 1 and 7 (names of Cases(),
	// checked with CheckCases); none: 2-6.
	Cases []string
	// Rollouts is how many rollouts case 8 makes (default 10).
	Rollouts int
	// OnRegistrar, when set, is told the registrar container once it is
	// known (before the cases run).
	OnRegistrar func(container string) error
	// RemoveLeft: once the cases ran, run the cleanup of what the driver
	// left on the nodes (Result.Left still lists it: the finding stands).
	RemoveLeft bool
}

// suite is one Run: the driver under test on one cluster.
type suite struct {
	cl       *workloadCluster
	opt      Options
	d        *driverUnderTest
	allNodes []string
	result   report.Result
	// notRegisteredAtStart: the cases that found the driver not registered
	// when they began.
	notRegisteredAtStart map[string]bool
	// seenLeft: the leftover volume directories already reported.
	seenLeft map[string]bool
	// blockRoll: why no rollout can complete (R1 found a host port); the
	// cases that roll skip with it.
	blockRoll string
	// sockets: R2's listings of the socket directory, for R3.
	sockets *socketRecord
	// socketThief: R3 saw an instance remove another's socket (R4 cannot
	// judge serving after SIGTERM then).
	socketThief bool
	// waitedTeardown: pod UIDs whose volumes' teardown a case waited for
	// already (leftAfter does not wait for them again).
	waitedTeardown map[string]bool
}

// driverUnderTest is what the suite learned from the driver's manifests and
// from the nodes.
type driverUnderTest struct {
	spec     *driverspec.Spec
	manifest string // the manifests as applied (registrar image swapped)
	name     string // the driver name the kubelet registers
	nameFrom string
	nodes    []string // the nodes where a pod of its workload runs, sorted (updated as pods move)
	// driver is the container whose process listens on the driver's socket
	// on the node, registrar the container that registers it: the spec's
	// registrar, else the driver (in-process).
	driver, registrar string
	// driverErr says why no driver container was found (case 5 fails with it).
	driverErr error
	// The time of `kubectl apply` and the CSINode recorders started before it.
	applied time.Time
	cnRecs  map[string]*record.Recorder
}

func (d *driverUnderTest) regSocket() string { return d.name + "-reg.sock" }

// rolling reports whether the manifests turn on the rolling-update mode:
// the driver's registration socket is then an announcement socket,
// <prefix>_<instance>_<version>-reg.sock (csiplugin), one at a time outside
// a rollout, and the endpoint it announces is the pod's own.
func (d *driverUnderTest) rolling() bool { return d.spec.RollingUpdate != "" }

// isRegSocket reports whether name is the driver's registration socket:
// d.regSocket() (also the handover's, passed from pod to pod), or with the
// mode an announcement socket of the driver.
func (d *driverUnderTest) isRegSocket(name string) bool {
	if name == d.regSocket() {
		return true
	}
	if d.rolling() {
		_, _, ok := csiplugin.ParseRollingUpdateSocketName(d.name, name)
		return ok
	}
	return false
}

// regSocketText names the registration socket in messages and is in every
// kubelet log line about it.
func (d *driverUnderTest) regSocketText() string {
	if d.rolling() {
		return csiplugin.RollingUpdatePrefix(d.name) + "_"
	}
	return d.regSocket()
}

// files returns the files of plugins_registry that belong to the driver.
func (d *driverUnderTest) files(all []NodeFile) []NodeFile {
	var out []NodeFile
	for _, f := range all {
		if strings.HasPrefix(f.Name, d.name) || d.rolling() && d.isRegSocket(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// currentRegSocket returns the name of the driver's registration socket on
// node: d.regSocket() (also the handover's), or with the mode's
// announcements the one with the highest version (the one the kubelet took
// last).
func (s *suite) currentRegSocket(ctx context.Context, node string) (string, error) {
	d := s.d
	if !d.rolling() {
		return d.regSocket(), nil
	}
	files, err := s.cl.Node.PluginsRegistry(ctx, node)
	if err != nil {
		return "", err
	}
	name, top := "", uint64(0)
	for _, f := range files {
		if f.Name == d.regSocket() && f.Socket {
			return f.Name, nil // the handover's
		}
		if _, v, ok := csiplugin.ParseRollingUpdateSocketName(d.name, f.Name); ok && f.Socket && (name == "" || v > top) {
			name, top = f.Name, v
		}
	}
	if name == "" {
		return "", fmt.Errorf("no registration socket %s (the handover's) nor announcement socket %s<instance>_<version>-reg.sock of the rolling-update mode in %s on %s (%s)", d.regSocket(), d.regSocketText(), PluginsRegistry, node, d.spec.RollingUpdate)
	}
	return name, nil
}

func (s *suite) logf(format string, args ...any) {
	fmt.Fprintf(s.opt.Out, "verify %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Prepare renders what Run applies, without touching the cluster: the
// manifests with the registrar swapped, labelled and restricted as opt
// says. Callers check with it what the manifests hold before Run.
func Prepare(opt Options) (*driverspec.Spec, []string, error) {
	spec, err := driverspec.Parse(opt.Rendered, opt.RegistrarImage)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", opt.Manifests, err)
	}
	var notes []string
	for _, sw := range spec.Swaps {
		notes = append(notes, "replaced: "+sw.String()+" (args as written)")
	}
	if len(opt.Nodes) > 0 {
		msg, err := spec.RestrictTo(opt.Nodes)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", opt.Manifests, err)
		}
		notes = append(notes, "restricted: "+msg)
	}
	if opt.LabelKey != "" {
		spec.Label(opt.LabelKey, opt.LabelValue)
		notes = append(notes, fmt.Sprintf("labelled: every object %s=%s", opt.LabelKey, opt.LabelValue))
	}
	return spec, notes, nil
}

// Run applies the driver's manifests, runs the seven cases in order on that
// one deployment, and returns their results; the last case uninstalls the
// driver. An error means the cases could not run (the setup failed); the
// cases' own failures are in the Result. The caller removes what is left
// if ctx ends early (kubectl delete -f opt.Applied).
func Run(ctx context.Context, cl Cluster, opt Options) (report.Result, error) {
	if opt.RegisterTimeout == 0 {
		opt.RegisterTimeout = time.Minute
	}
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	s := &suite{opt: opt, notRegisteredAtStart: map[string]bool{}, seenLeft: map[string]bool{}, waitedTeardown: map[string]bool{}}
	s.result = report.Result{Driver: opt.Manifests, Registrar: opt.RegistrarImage, Provider: cl.Provider}
	defer func() {
		if s.d != nil {
			for _, r := range s.d.cnRecs {
				r.Stop()
			}
		}
	}()
	if err := s.setup(ctx, cl); err != nil {
		if s.cl != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			fmt.Fprintln(opt.Out, s.cl.Diagnostics(dctx, s.allNodes))
		}
		return s.result, err
	}
	s.cases(ctx)
	if opt.RemoveLeft {
		s.removeLeft(ctx)
	}
	return s.result, nil
}

// removeLeft runs the cleanup of each leftover on its node.
func (s *suite) removeLeft(ctx context.Context) {
	for _, l := range s.result.Left {
		_, err := s.cl.Node.NodeSh(ctx, l.Node, strings.Join(l.Cleanup(), "; "))
		if err != nil {
			s.logf("remove what the driver left: %s: %v", l.Dir, err)
			continue
		}
		s.logf("removed what the driver left (--remove-left): %s", l.Dir)
	}
}

// setup applies the manifests and waits until every pod of the workload is
// Ready. Whether the kubelet registers the driver is case 1's question.
func (s *suite) setup(ctx context.Context, cl Cluster) error {
	opt := s.opt
	spec, notes, err := Prepare(opt)
	if err != nil {
		return err
	}
	for _, n := range notes {
		s.logf("%s", n)
	}
	for _, p := range spec.Problems() {
		s.logf("warning: %s", p)
	}
	d := &driverUnderTest{spec: spec, name: spec.DriverName, nameFrom: spec.DriverNameFrom, cnRecs: map[string]*record.Recorder{}}
	// A path set from a field (the mode's $(POD_UID)) is asked of the
	// registration socket where it can be dialed; elsewhere it is expanded
	// for each pod from the pod object (driverspec.ExpandForPod).
	learn := d.name == "" || spec.RegistrationPath == "" || (strings.Contains(spec.RegistrationPath, "$(") && cl.Dialer != nil)
	if learn && cl.Dialer == nil {
		return fmt.Errorf("%s: the manifests do not say the driver's name and socket (--driver-name or one CSIDriver object; a registrar's --kubelet-registration-path), and this run cannot dial the node's registration socket to ask it (GetInfo): add --driver-name to the registrar's args, or run where the node's sockets can be dialed (the local node)", opt.Manifests)
	}
	y, err := spec.YAML()
	if err != nil {
		return err
	}
	d.manifest = opt.Applied
	if err := os.MkdirAll(filepath.Dir(d.manifest), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(d.manifest, y, 0o644); err != nil {
		return err
	}
	s.logf("manifests as applied: %s", d.manifest)

	w := spec.Workload
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return fmt.Errorf("%s: selector: %w", w, err)
	}
	s.cl = &workloadCluster{Cluster: cl, Namespace: spec.Namespace, Selector: sel.String(), Workload: w.String()}
	if spec.Registrar == "" {
		s.result.Registrar = "in-process"
	}
	if v, err := cl.Client.Discovery().ServerVersion(); err == nil {
		s.result.Kubernetes = v.GitVersion
	}
	if s.allNodes, err = NodeNames(ctx, cl.Client); err != nil {
		return err
	}
	watched := s.allNodes
	if len(opt.Nodes) > 0 {
		watched = opt.Nodes
	}

	before := map[string]map[string]bool{} // node -> socket IDs before the apply
	for _, n := range watched {
		if learn {
			files, err := cl.Node.PluginsRegistry(ctx, n)
			if err != nil {
				return err
			}
			before[n] = map[string]bool{}
			for _, f := range files {
				before[n][f.ID()] = true
			}
		}
		r, err := RecordCSINode(ctx, cl.Client, n)
		if err != nil {
			return err
		}
		d.cnRecs[n] = r
	}
	pods, err := s.cl.RecordPods(ctx)
	if err != nil {
		return err
	}
	defer pods.Stop()
	d.applied = time.Now()
	if _, err := cl.Kubectl(ctx, "apply", "-f", d.manifest); err != nil {
		return err
	}
	if err := s.waitPodsReady(ctx, spec.Workload, 3*time.Minute); err != nil {
		return err
	}
	if err := s.updateNodes(ctx, d); err != nil {
		return err
	}
	for _, n := range d.nodes {
		if _, ev, err := pods.Await(ctx, 0, time.Second, "pod Ready on "+n, func(st record.State) bool {
			for _, p := range st.Pods() {
				if p.Spec.NodeName == n && PodReady(p) {
					return true
				}
			}
			return false
		}); err == nil {
			s.logf("measured: kubectl apply -> pod Ready on %s: %.3f s", n, ev.At.Sub(d.applied).Seconds())
		}
	}
	if learn {
		if err := s.learnName(ctx, d, before); err != nil {
			return err
		}
	}
	wpods, err := s.cl.Pods(ctx)
	if err != nil {
		return err
	}
	if err := s.findDriver(ctx, d, wpods); err != nil {
		// Case 1 still tells whether and why the kubelet registers the
		// driver; case 5, which kills the driver container, fails with this.
		d.driverErr = err
		s.logf("%v", err)
	}
	if opt.OnRegistrar != nil {
		if err := opt.OnRegistrar(d.registrar); err != nil {
			return err
		}
	}
	s.d = d
	s.logf("driver %s (from %s); %s on %v (moves: %v): registrar container %s, driver container %q (its process listens on the driver's socket); --csi-address=%s, --kubelet-registration-path=%s; node sockets dialable: %v",
		d.name, d.nameFrom, w, d.nodes, w.Moves(), orInProcess(spec.Registrar), d.driver, spec.CSIAddress, spec.RegistrationPath, cl.Dialer != nil)
	return nil
}

func orInProcess(s string) string {
	if s == "" {
		return "none (the driver registers in-process)"
	}
	return s
}

// updateNodes sets d.nodes to the nodes where a pod of the workload runs.
func (s *suite) updateNodes(ctx context.Context, d *driverUnderTest) error {
	pm, err := s.cl.Pods(ctx)
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

// FindDriver learns the driver container on every node of pods (the
// workload's pods by node) from what runs: the container whose process
// listens on the CSI socket the registrar dials (its --csi-address, on the
// node), or, without a registrar container or when that is not on a
// hostPath, the socket announced to the kubelet. It must be the same
// container on every node; the error of a node where none is found names
// what was tried. It returns the driver and the registrar container.
func FindDriver(ctx context.Context, n Node, spec *driverspec.Spec, pods map[string]*corev1.Pod) (driver, registrar string, err error) {
	d := &driverUnderTest{spec: spec}
	for node := range pods {
		d.nodes = append(d.nodes, node)
	}
	sort.Strings(d.nodes)
	s := &suite{cl: &workloadCluster{Cluster: Cluster{Node: n}}}
	err = s.findDriver(ctx, d, pods)
	return d.driver, d.registrar, err
}

func (s *suite) findDriver(ctx context.Context, d *driverUnderTest, pods map[string]*corev1.Pod) error {
	d.registrar = d.spec.Registrar
	sock, what := d.spec.HostSocket, "the registrar's --csi-address="+d.spec.CSIAddress+" on the node"
	if sock == "" {
		sock, what = d.spec.RegistrationPath, "the driver's socket the kubelet is told (GetInfo's endpoint)"
	}
	for _, n := range d.nodes {
		// The mode's socket is named by the pod's UID: each pod's own.
		c, err := SocketOwner(ctx, s.cl.Node, pods[n], driverspec.ExpandForPod(sock, pods[n], d.spec.Registrar))
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

// learnName asks the registration sockets that appeared since the apply
// (GetInfo, as the kubelet does) which one announces the driver's socket
// (--kubelet-registration-path), and takes its name.
func (s *suite) learnName(ctx context.Context, d *driverUnderTest, before map[string]map[string]bool) error {
	n := d.nodes[0]
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, s.opt.RegisterTimeout, true, func(ctx context.Context) (bool, error) {
		files, err := s.cl.Node.PluginsRegistry(ctx, n)
		if err != nil {
			return false, err
		}
		seen = nil
		for _, f := range files {
			if !f.Socket || before[n][f.ID()] {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			info, err := RegistrationInfo(cctx, s.cl.Dialer, n, PluginsRegistry+"/"+f.Name)
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
			n, d.spec.RegistrationPath, s.opt.RegisterTimeout, seen)
	}
	return nil
}

// waitPodsReady waits until the workload is rolled out and each of its pods
// is Ready: a DaemonSet by the one rule (DaemonSetRolloutProblems), another
// workload when its pods are Ready on a node. Readiness is the manifests'
// own (upstream layouts have no readiness probe: Ready means running);
// registration is not waited for.
func (s *suite) waitPodsReady(ctx context.Context, w driverspec.Workload, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if w.Kind == "DaemonSet" {
			p, _, err := DaemonSetRollout(ctx, s.cl.Client, s.cl.Namespace, w.Name, s.cl.Selector)
			switch {
			case err != nil:
				last = err.Error()
			case len(p) > 0:
				last = strings.Join(p, "; ")
			}
			return err == nil && len(p) == 0, nil
		}
		pods, err := s.cl.Pods(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for n, p := range pods {
			if !PodReady(p) {
				last = fmt.Sprintf("pod %s on %s: Ready %v; %s", p.Name, n, PodReady(p), waitingReasons(p))
				return false, nil
			}
		}
		if want := int(w.Replicas); len(pods) != want {
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
