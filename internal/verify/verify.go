package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

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
	Expect []report.Expectation
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
//
// The stages run in order; the first that fails ends the run with its exit
// code. Whatever the run made is removed when Run returns (an error,
// SIGINT, SIGTERM included).
func Run(ctx context.Context, cfg Config) (int, error) {
	r := &run{cfg: cfg, out: cfg.Out}
	defer r.undo(ctx)
	for _, stage := range []func(context.Context) error{
		r.connect,         // a client of the kubeconfig's cluster
		r.chooseNodes,     // warn, pick the nodes acted on
		r.refuseCluster,   // unmarked nodes, missing RBAC
		r.renderManifests, // kustomize each -f
		r.makeWorkdir,     // where the manifests as applied are kept
		r.createNamespace, // the run's namespace for the node pods
		r.startNodePods,   // the node pods, closed when Run returns
		r.pickRegistrars,  // --registrar-image, then each --compare
		r.runCases,        // every manifest with every registrar
		r.printTables,     // one table of every result
	} {
		if err := stage(ctx); err != nil {
			return exitCode(err)
		}
	}
	return r.verdict(ctx)
}

// runOne refuses a cluster where the driver is installed, then runs the
// cases with the manifests tracked until they are deleted.
func runOne(ctx context.Context, cl drivercases.Cluster, np *nodePods, tr *tracker, targets []string, opt drivercases.Options) (report.Result, error) {
	spec, _, err := drivercases.Prepare(opt)
	if err != nil {
		return report.Result{}, err
	}
	nodes, err := drivercases.NodeNames(ctx, cl.Client)
	if err != nil {
		return report.Result{}, err
	}
	reasons, err := installed(ctx, cl.Client, spec, nodes)
	if err != nil {
		return report.Result{}, err
	}
	left, err := leftoverSockets(ctx, np, spec.DriverName, targets)
	if err != nil {
		return report.Result{}, err
	}
	reasons = append(reasons, left...)
	y, err := spec.YAML()
	if err != nil {
		return report.Result{}, err
	}
	probe := opt.Applied + ".check.yaml"
	if err := os.WriteFile(probe, y, 0o644); err != nil {
		return report.Result{}, err
	}
	existing, err := cl.Kubectl(ctx, "get", "-f", probe, "--ignore-not-found", "-o", "name")
	if err != nil {
		return report.Result{}, fmt.Errorf("check which objects of %s exist: %w", opt.Manifests, err)
	}
	for _, o := range strings.Fields(existing) {
		reasons = append(reasons, fmt.Sprintf("%s of %s exists already: verify applies and deletes the manifests' objects, and never touches one it did not create. Fix: delete it, or verify on a cluster without it", o, opt.Manifests))
	}
	if len(reasons) > 0 {
		return report.Result{}, &Refusal{Reasons: reasons}
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
