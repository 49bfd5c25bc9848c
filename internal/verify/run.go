package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
)

// run is one verify run: what its stages found and made, in the order Run
// calls them.
type run struct {
	cfg Config
	out io.Writer

	blocked *logBlock
	rest    *rest.Config
	client  kubernetes.Interface
	nodes   []corev1.Node // every node of the cluster
	targets []string      // the nodes acted on
	// rendered[i] are the manifests of cfg.Files[i].
	rendered   [][]byte
	workdir    string
	id         string
	namespace  string // the run's, for the node pods
	track      *tracker
	nodePods   *nodePods
	cluster    drivercases.Cluster
	registrars []string
	results    []report.Result
	code       int // the worst outcome of the cases so far
	// undos remove what the stages made, newest first.
	undos []func(context.Context)
}

// exitError is an error with the exit code Run returns for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// refused: bad arguments, or a cluster verify will not run on.
func refused(err error) error { return &exitError{ExitRefused, err} }

// incomplete: the cases could not run.
func incomplete(err error) error { return &exitError{ExitIncomplete, err} }

// exitCode is the exit code of a stage's error and the error as it was made.
func exitCode(err error) (int, error) {
	var e *exitError
	if errors.As(err, &e) {
		return e.code, e.err
	}
	var r *Refusal
	if errors.As(err, &r) {
		return ExitRefused, err
	}
	return ExitIncomplete, err
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.out, "verify %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// undo runs what removes the stages' work, newest first, each with a context
// of its own: the run's may have ended.
func (r *run) undo(ctx context.Context) {
	for i := len(r.undos) - 1; i >= 0; i-- {
		r.undos[i](ctx)
	}
}

// connect makes the client, with the registrar's log blocked when asked.
func (r *run) connect(context.Context) error {
	r.blocked = &logBlock{}
	r.rest = rest.CopyConfig(r.cfg.RESTConfig)
	if r.rest.QPS == 0 {
		r.rest.QPS, r.rest.Burst = 50, 100
	}
	if r.cfg.BlockRegistrarLogs {
		r.rest.Wrap(r.blocked.wrap)
	}
	client, err := kubernetes.NewForConfig(r.rest)
	if err != nil {
		return refused(fmt.Errorf("kubeconfig: %w", err))
	}
	r.client = client
	return nil
}

// chooseNodes says what verify does, then picks the nodes it acts on.
func (r *run) chooseNodes(ctx context.Context) error {
	fmt.Fprintf(r.out, "kubectl csi-registrar verify is DISRUPTIVE: on the node(s) it acts on it installs and uninstalls the driver,\n"+
		"deletes its pod, restarts the kubelet, removes the registration socket, kills the driver's container and rolls its workload.\n")
	nl, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return incomplete(fmt.Errorf("list nodes: %w", err))
	}
	r.nodes = nl.Items
	if r.targets, err = pickNodes(r.nodes, r.cfg.Nodes, r.cfg.AllNodes); err != nil {
		return refused(err)
	}
	r.logf("nodes acted on: %s", strings.Join(r.targets, ", "))
	return nil
}

// refuseCluster refuses nodes without the marker (unless disruptive) and
// missing permissions, every reason at once.
func (r *run) refuseCluster(ctx context.Context) error {
	reasons := checkMarker(r.nodes, r.targets, r.cfg.Disruptive)
	missing, err := missingRBAC(ctx, r.client)
	if err != nil {
		return incomplete(err)
	}
	reasons = append(reasons, missing...)
	if len(reasons) > 0 {
		return &Refusal{Reasons: reasons}
	}
	return nil
}

// renderManifests renders every -f before anything is made.
func (r *run) renderManifests(ctx context.Context) error {
	r.rendered = make([][]byte, len(r.cfg.Files))
	for i, f := range r.cfg.Files {
		var err error
		if r.rendered[i], err = render(ctx, r.cfg.Kubectl, f); err != nil {
			return refused(err)
		}
	}
	return nil
}

// makeWorkdir makes --workdir, or a temporary directory removed at the end.
func (r *run) makeWorkdir(context.Context) error {
	if r.cfg.Workdir != "" {
		r.workdir = r.cfg.Workdir
		if err := os.MkdirAll(r.workdir, 0o755); err != nil {
			return refused(fmt.Errorf("--workdir=%s: %w (a directory for the manifests as applied)", r.workdir, err))
		}
		return nil
	}
	dir, err := os.MkdirTemp("", "csi-registrar-verify-")
	if err != nil {
		return incomplete(err)
	}
	r.workdir = dir
	r.undos = append(r.undos, func(context.Context) { os.RemoveAll(dir) })
	return nil
}

// createNamespace creates the run's namespace and starts tracking what the
// run makes; everything tracked is removed at the end.
func (r *run) createNamespace(ctx context.Context) error {
	r.id = runID()
	r.track = &tracker{client: r.client, kubectl: r.cfg.Kubectl}
	r.undos = append(r.undos, r.removeTracked)
	ns, err := r.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "csi-registrar-verify-",
		Labels:       map[string]string{RunLabel: r.id, psaLabel: "privileged"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return incomplete(fmt.Errorf("create the run's namespace: %w", err))
	}
	r.namespace = ns.Name
	r.track.add(kindNamespace, "", ns.Name)
	r.logf("run %s: namespace %s (Pod Security privileged) for the node pods (image %s)", r.id, ns.Name, r.cfg.NodeImage)
	return nil
}

// removeTracked removes what this run made (an error, SIGINT, SIGTERM).
func (r *run) removeTracked(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*time.Minute)
	defer cancel()
	done, err := r.track.removeAll(cctx)
	for _, d := range done {
		r.logf("removed %s", d)
	}
	if err != nil {
		r.logf("cleanup: %v (kubectl csi-registrar verify --cleanup removes leftovers by label %s)", err, RunLabel)
	}
}

// startNodePods sets up the node pods (made on first use, closed at the end)
// and the cluster the cases act on.
func (r *run) startNodePods(context.Context) error {
	r.nodePods = &nodePods{client: r.client, config: r.rest, namespace: r.namespace, image: r.cfg.NodeImage,
		labels: map[string]string{RunLabel: r.id}, deadline: r.cfg.Timeout, track: r.track, pods: map[string]string{}}
	r.undos = append(r.undos, func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := r.nodePods.Close(cctx); err != nil {
			r.logf("%v", err)
		}
	})
	r.cluster = drivercases.Cluster{Client: r.client, Kubectl: r.cfg.Kubectl, Node: r.nodePods, Provider: "kubeconfig context"}
	if r.cfg.LocalSockets {
		r.cluster.Dialer = localDialer{}
		r.cluster.Provider = "local"
	}
	return nil
}

// pickRegistrars: --registrar-image, then the image of each --compare.
func (r *run) pickRegistrars(context.Context) error {
	r.registrars = []string{r.cfg.RegistrarImage}
	for _, c := range r.cfg.Compare {
		img, err := compareImage(c)
		if err != nil {
			return refused(err)
		}
		r.registrars = append(r.registrars, img)
	}
	return nil
}

// runCases runs the cases on every manifest with every registrar, until the
// run's context ends; a refusal ends them.
func (r *run) runCases(ctx context.Context) error {
	total := len(r.registrars) * len(r.cfg.Files)
	i := 0
	for _, reg := range r.registrars {
		for fi := range r.cfg.Files {
			i++
			if ctx.Err() != nil {
				break
			}
			if err := r.runCase(ctx, fmt.Sprintf("%d/%d", i, total), r.options(i, fi, reg)); err != nil {
				return err
			}
		}
	}
	return nil
}

// options are the cases' options for the i-th run: file fi with registrar reg.
func (r *run) options(i, fi int, reg string) drivercases.Options {
	f := r.cfg.Files[fi]
	opt := drivercases.Options{
		Manifests: f, Rendered: r.rendered[fi], RegistrarImage: reg, RegisterTimeout: r.cfg.RegisterTimeout,
		LabelKey: RunLabel, LabelValue: r.id, Out: r.out, WorkloadImage: r.cfg.NodeImage,
		Cases: r.cfg.Cases, Rollouts: r.cfg.Rollouts, RemoveLeft: r.cfg.RemoveLeft,
		Applied: filepath.Join(r.workdir, fmt.Sprintf("%d-%s.yaml", i, filepath.Base(f))),
		OnRegistrar: func(c string) error {
			if r.cfg.BlockRegistrarLogs {
				r.blocked.container.Store(&c)
				r.logf("registrar logs blocked: every read of container %s's log through the API fails", c)
			}
			return nil
		},
	}
	if !r.cfg.AllNodes || len(r.cfg.Nodes) > 0 {
		opt.Nodes = r.targets
	}
	return opt
}

// runCase runs the cases of opt, keeps the result and the worst outcome; it
// returns only a refusal.
func (r *run) runCase(ctx context.Context, step string, opt drivercases.Options) error {
	start := time.Now()
	fmt.Fprintf(r.out, "==== verify %s: %s with %s\n", step, opt.Manifests, opt.RegistrarImage)
	res, err := runOne(ctx, r.cluster, r.nodePods, r.track, r.targets, opt)
	fmt.Fprintf(r.out, "==== verify %s: %s with %s: %s\n", step, opt.Manifests, opt.RegistrarImage, time.Since(start).Round(time.Second))
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		return err
	case err != nil:
		r.logf("%s with %s: the cases could not run: %v", opt.Manifests, opt.RegistrarImage, err)
		r.code = max(r.code, ExitIncomplete)
	case res.Failed():
		r.code = max(r.code, ExitFailed)
	case !res.Passed() && res.NotChecked():
		// Verify's own means failed: nothing said about the driver.
		r.code = max(r.code, ExitIncomplete)
	case !res.Passed():
		r.code = max(r.code, ExitFailed)
	}
	if len(res.Cases) > 0 {
		r.results = append(r.results, res)
	}
	return nil
}

// printTables prints the table of every result, readiness and what was left.
func (r *run) printTables(context.Context) error {
	fmt.Fprintln(r.out, "==== registration cases (verdict: the kubelet's and the API's; restarts: container restarts during the case; times from the fault, s)")
	fmt.Fprint(r.out, report.Table(r.results))
	fmt.Fprint(r.out, drivercases.ReadinessText(r.results))
	fmt.Fprint(r.out, report.LeftText(r.results))
	return nil
}

// verdict is the run's exit code: interrupted, against --expect when given,
// else the worst outcome of the cases.
func (r *run) verdict(ctx context.Context) (int, error) {
	if ctx.Err() != nil {
		return ExitIncomplete, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	if r.cfg.Expect != nil && r.code != ExitIncomplete {
		if bad := report.CheckExpectations(r.results, r.cfg.Expect); len(bad) > 0 {
			fmt.Fprintf(r.out, "==== not as expected (--expect):\n- %s\n", strings.Join(bad, "\n- "))
			return ExitFailed, errors.New("the outcomes differ from --expect")
		}
		fmt.Fprintf(r.out, "==== every outcome as expected (--expect: %d expectations; every other case passed)\n", len(r.cfg.Expect))
		return ExitPassed, nil
	}
	if r.code != ExitPassed {
		return r.code, errors.New("not every case passed")
	}
	return r.code, nil
}
