package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
)

// Exit codes.
const (
	ExitPassed     = 0 // every case of every run passed
	ExitFailed     = 1 // a case failed
	ExitRefused    = 2 // bad arguments, or a cluster verify will not run on
	ExitIncomplete = 3 // the cases could not run (a setup failed, interrupted)
)

// Config is what `kubectl csi-registrar verify` was asked.
type Config struct {
	RESTConfig *rest.Config
	Kubectl    drivercases.Kubectl
	// Files are the driver's manifests: kustomize directories or files.
	Files []string
	// Nodes to act on (--node); AllNodes: every node.
	Nodes    []string
	AllNodes bool
	// NodeImage is the node pod's image (a shell with nsenter and chroot).
	NodeImage string
	// RegistrarImage replaces node-driver-registrar; Compare are other
	// registrar images run the same way after it, for one table.
	RegistrarImage string
	Compare        []string
	Disruptive     bool
	// RegisterTimeout: how long case 1 waits for the registration.
	RegisterTimeout time.Duration
	// RegistrarLogs is keep or blocked (--registrar-logs); Validate sets
	// BlockRegistrarLogs from it.
	RegistrarLogs string
	// BlockRegistrarLogs: every read of the registrar container's log
	// through the API fails (no verdict may rest on it).
	BlockRegistrarLogs bool
	// LocalSockets: the node is this machine; dial its sockets directly.
	LocalSockets bool
	// Workdir holds the manifests as applied (default: a temporary one).
	Workdir string
	// Cases are the cases to run besides 1 and 7 (drivercases.Cases;
	// checked with drivercases.CheckCases); none: 2-6. Rollouts: how many
	// rollouts case 8 makes.
	Cases    []string
	Rollouts int
	// ExpectFile is the file of expected outcomes (--expect); Validate
	// reads it into Expect.
	ExpectFile string
	// Expect, when set, are the outcomes expected (a non-compliant
	// example's failures): the run passes when the outcomes are exactly
	// these and every other case passes.
	Expect []drivercases.Expectation
	// RemoveLeft: remove what the driver left on the nodes once its cases
	// ran (the finding stands).
	RemoveLeft bool
	// Cleanup: remove what earlier runs left instead of running (--cleanup).
	Cleanup bool
	// Timeout bounds the run; the node pods end by themselves after it.
	Timeout time.Duration
	Out     io.Writer
}

// Run runs the cases on every manifest with every registrar and prints one
// table. It returns the exit code; err says why it is not 0.
func Run(ctx context.Context, cfg Config) (int, error) {
	out := cfg.Out
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, "verify %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	blocked := &logBlock{}
	rc := rest.CopyConfig(cfg.RESTConfig)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	if cfg.BlockRegistrarLogs {
		rc.Wrap(blocked.wrap)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return ExitRefused, fmt.Errorf("kubeconfig: %w", err)
	}

	fmt.Fprintf(out, "kubectl csi-registrar verify is DISRUPTIVE: on the node(s) it acts on it installs and uninstalls the driver,\n"+
		"deletes its pod, restarts the kubelet, removes the registration socket, kills the driver's container and rolls its workload.\n")
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return ExitIncomplete, fmt.Errorf("list nodes: %w", err)
	}
	targets, err := pickNodes(nl.Items, cfg.Nodes, cfg.AllNodes)
	if err != nil {
		return ExitRefused, err
	}
	logf("nodes acted on: %s", strings.Join(targets, ", "))
	var reasons []string
	reasons = append(reasons, checkMarker(nl.Items, targets, cfg.Disruptive)...)
	missing, err := missingRBAC(ctx, client)
	if err != nil {
		return ExitIncomplete, err
	}
	reasons = append(reasons, missing...)
	if len(reasons) > 0 {
		return ExitRefused, &Refusal{Reasons: reasons}
	}

	rendered := make([][]byte, len(cfg.Files))
	for i, f := range cfg.Files {
		if rendered[i], err = render(ctx, cfg.Kubectl, f); err != nil {
			return ExitRefused, err
		}
	}
	workdir := cfg.Workdir
	if workdir == "" {
		if workdir, err = os.MkdirTemp("", "csi-registrar-verify-"); err != nil {
			return ExitIncomplete, err
		}
		defer os.RemoveAll(workdir)
	} else if err := os.MkdirAll(workdir, 0o755); err != nil {
		return ExitRefused, fmt.Errorf("--workdir=%s: %w (a directory for the manifests as applied)", workdir, err)
	}
	run := runID()
	labels := map[string]string{RunLabel: run}
	tr := &tracker{client: client, kubectl: cfg.Kubectl}
	defer func() {
		// Whatever is left (an error, SIGINT, SIGTERM): remove what this run made.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*time.Minute)
		defer cancel()
		done, err := tr.removeAll(cctx)
		for _, d := range done {
			logf("removed %s", d)
		}
		if err != nil {
			logf("cleanup: %v (kubectl csi-registrar verify --cleanup removes leftovers by label %s)", err, RunLabel)
		}
	}()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "csi-registrar-verify-",
		Labels:       map[string]string{RunLabel: run, psaLabel: "privileged"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return ExitIncomplete, fmt.Errorf("create the run's namespace: %w", err)
	}
	tr.add(kindNamespace, "", ns.Name)
	logf("run %s: namespace %s (Pod Security privileged) for the node pods (image %s)", run, ns.Name, cfg.NodeImage)
	np := &nodePods{client: client, config: rc, namespace: ns.Name, image: cfg.NodeImage, labels: labels,
		deadline: cfg.Timeout, track: tr, pods: map[string]string{}}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := np.Close(cctx); err != nil {
			logf("%v", err)
		}
	}()
	cl := drivercases.Cluster{Client: client, Kubectl: cfg.Kubectl, Node: np, Provider: "kubeconfig context"}
	if cfg.LocalSockets {
		cl.Dialer = localDialer{}
		cl.Provider = "local"
	}

	registrars := []string{cfg.RegistrarImage}
	for _, c := range cfg.Compare {
		img, err := compareImage(c)
		if err != nil {
			return ExitRefused, err
		}
		registrars = append(registrars, img)
	}
	var results []drivercases.Result
	code := ExitPassed
	total := len(registrars) * len(cfg.Files)
	i := 0
	for _, reg := range registrars {
		for fi, f := range cfg.Files {
			i++
			if ctx.Err() != nil {
				break
			}
			start := time.Now()
			fmt.Fprintf(out, "==== verify %d/%d: %s with %s\n", i, total, f, reg)
			opt := drivercases.Options{
				Manifests: f, Rendered: rendered[fi], RegistrarImage: reg, RegisterTimeout: cfg.RegisterTimeout,
				LabelKey: RunLabel, LabelValue: run, Out: out, WorkloadImage: cfg.NodeImage,
				Cases: cfg.Cases, Rollouts: cfg.Rollouts, RemoveLeft: cfg.RemoveLeft,
				Applied: filepath.Join(workdir, fmt.Sprintf("%d-%s.yaml", i, filepath.Base(f))),
				OnRegistrar: func(c string) error {
					if cfg.BlockRegistrarLogs {
						blocked.container.Store(&c)
						logf("registrar logs blocked: every read of container %s's log through the API fails", c)
					}
					return nil
				},
			}
			if !cfg.AllNodes || len(cfg.Nodes) > 0 {
				opt.Nodes = targets
			}
			r, err := runOne(ctx, cl, np, tr, targets, opt)
			fmt.Fprintf(out, "==== verify %d/%d: %s with %s: %s\n", i, total, f, reg, time.Since(start).Round(time.Second))
			var refused *Refusal
			switch {
			case errors.As(err, &refused):
				return ExitRefused, err
			case err != nil:
				logf("%s with %s: the cases could not run: %v", f, reg, err)
				code = max(code, ExitIncomplete)
			case r.Failed():
				code = max(code, ExitFailed)
			case !r.Passed() && r.NotChecked():
				// Verify's own means failed: nothing said about the driver.
				code = max(code, ExitIncomplete)
			case !r.Passed():
				code = max(code, ExitFailed)
			}
			if len(r.Cases) > 0 {
				results = append(results, r)
			}
		}
	}
	fmt.Fprintln(out, "==== registration cases (verdict: the kubelet's and the API's; restarts: container restarts during the case; times from the fault, s)")
	fmt.Fprint(out, report.Table(results))
	fmt.Fprint(out, drivercases.ReadinessText(results))
	fmt.Fprint(out, report.LeftText(results))
	if ctx.Err() != nil {
		return ExitIncomplete, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	if cfg.Expect != nil && code != ExitIncomplete {
		if bad := report.CheckExpectations(results, cfg.Expect); len(bad) > 0 {
			fmt.Fprintf(out, "==== not as expected (--expect):\n- %s\n", strings.Join(bad, "\n- "))
			return ExitFailed, errors.New("the outcomes differ from --expect")
		}
		fmt.Fprintf(out, "==== every outcome as expected (--expect: %d expectations; every other case passed)\n", len(cfg.Expect))
		return ExitPassed, nil
	}
	if code != ExitPassed {
		return code, errors.New("not every case passed")
	}
	return code, nil
}

// runOne refuses a cluster where the driver is installed, then runs the
// cases with the manifests tracked until they are deleted.
func runOne(ctx context.Context, cl drivercases.Cluster, np *nodePods, tr *tracker, targets []string, opt drivercases.Options) (drivercases.Result, error) {
	spec, _, err := drivercases.Prepare(opt)
	if err != nil {
		return drivercases.Result{}, err
	}
	nodes, err := drivercases.NodeNames(ctx, cl.Client)
	if err != nil {
		return drivercases.Result{}, err
	}
	reasons, err := installed(ctx, cl.Client, spec, nodes)
	if err != nil {
		return drivercases.Result{}, err
	}
	left, err := leftoverSockets(ctx, np, spec.DriverName, targets)
	if err != nil {
		return drivercases.Result{}, err
	}
	reasons = append(reasons, left...)
	y, err := spec.YAML()
	if err != nil {
		return drivercases.Result{}, err
	}
	probe := opt.Applied + ".check.yaml"
	if err := os.WriteFile(probe, y, 0o644); err != nil {
		return drivercases.Result{}, err
	}
	existing, err := cl.Kubectl(ctx, "get", "-f", probe, "--ignore-not-found", "-o", "name")
	if err != nil {
		return drivercases.Result{}, fmt.Errorf("check which objects of %s exist: %w", opt.Manifests, err)
	}
	for _, o := range strings.Fields(existing) {
		reasons = append(reasons, fmt.Sprintf("%s of %s exists already: verify applies and deletes the manifests' objects, and never touches one it did not create. Fix: delete it, or verify on a cluster without it", o, opt.Manifests))
	}
	if len(reasons) > 0 {
		return drivercases.Result{}, &Refusal{Reasons: reasons}
	}
	tr.add(kindManifests, "", opt.Applied)
	r, err := drivercases.Run(ctx, cl, opt)
	if ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		defer cancel()
		if _, derr := cl.Kubectl(cctx, "delete", "-f", opt.Applied, "--ignore-not-found", "--wait=true", "--timeout=180s"); derr == nil {
			tr.remove(kindManifests, "", opt.Applied)
		}
	}
	return r, err
}

// render returns the manifests of f: `kubectl kustomize` of a directory,
// the file as it is otherwise.
func render(ctx context.Context, kubectl drivercases.Kubectl, f string) ([]byte, error) {
	st, err := os.Stat(f)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w (want a kustomize directory or a manifest file)", f, err)
	}
	if !st.IsDir() {
		return os.ReadFile(f)
	}
	found := false
	for _, k := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, err := os.Stat(filepath.Join(f, k)); err == nil {
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("-f %s is a directory without a kustomization.yaml: pass a kustomize directory or a manifest file", f)
	}
	out, err := kubectl(ctx, "kustomize", f)
	return []byte(out), err
}

func runID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// localDialer dials the node's unix sockets as host paths: the node is
// this machine (--local-node-sockets).
type localDialer struct{}

func (localDialer) DialNode(ctx context.Context, _, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// logBlock fails every read of container's log through the API once the
// container is known.
type logBlock struct{ container atomic.Pointer[string] }

func (b *logBlock) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if c := b.container.Load(); c != nil && strings.HasSuffix(req.URL.Path, "/log") && req.URL.Query().Get("container") == *c {
			return nil, fmt.Errorf("the log of container %s is blocked (--registrar-logs=blocked)", *c)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// compareImage is the image of --compare: the value, or the image name an
// archive carries when the value is an image archive (.tar) that exists
// (the archive must be on the nodes already).
func compareImage(v string) (string, error) {
	if !strings.HasSuffix(v, ".tar") {
		return v, nil
	}
	if _, err := os.Stat(v); err != nil {
		return "", fmt.Errorf("--compare=%s: %w (an image name, or an image archive whose image the nodes have)", v, err)
	}
	img, err := drivercases.ArchiveImage(v)
	if err != nil {
		return "", fmt.Errorf("--compare=%s: %w", v, err)
	}
	return img, nil
}
