package pluginmanager

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "unsafe" // go:linkname: the CSI handler's in-memory driver store

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	fakeclient "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	kubeletcsi "k8s.io/kubernetes/pkg/volume/csi"
	volumetest "k8s.io/kubernetes/pkg/volume/testing"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// nodeName is the Node the CSI handler writes to through the fake client.
const nodeName = "pm-node"

// childEnv, when set, makes the test binary a registrar process (see
// runChild): scenario 4 kills one with SIGKILL.
const childEnv = "PLUGINMANAGER_TEST_REGISTRAR"

func TestMain(m *testing.M) {
	if opts := os.Getenv(childEnv); opts != "" {
		runChild(opts)
		return
	}
	// The kubelet's packages log through klog: into the running test's log.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(klogSink{})
	code := m.Run()
	if kubelet != nil {
		os.RemoveAll(kubelet.root) // the fake volume host's directory, made once per process
	}
	os.Exit(code)
}

// ---- logs ------------------------------------------------------------------

// testLog forwards writes to t.Log with a prefix until the test ends, and
// keeps the distinct lines (klog writes a line once per severity it is at
// or above) for counting.
type testLog struct {
	mu     sync.Mutex
	t      *testing.T
	prefix string
	seen   map[string]bool
	lines  []string
}

func newTestLog(t *testing.T, prefix string) *testLog {
	l := &testLog{t: t, prefix: prefix}
	t.Cleanup(func() { l.mu.Lock(); l.t = nil; l.mu.Unlock() })
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := strings.TrimRight(string(p), "\n")
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[line] {
		return len(p), nil
	}
	l.seen[line] = true
	l.lines = append(l.lines, line)
	if l.t != nil {
		l.t.Log(l.prefix + line)
	}
	return len(p), nil
}

// count returns how many distinct lines contain s.
func (l *testLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

var klogTarget atomic.Pointer[testLog]

type klogSink struct{}

func (klogSink) Write(p []byte) (int, error) {
	if l := klogTarget.Load(); l != nil {
		return l.Write(p)
	}
	return len(p), nil
}

// ---- the kubelet's CSI handler ------------------------------------------------

// kubeletDrivers is the CSI handler's in-memory store of registered drivers
// (name → endpoint and version): what a kubelet restart loses. The tests
// read the endpoint it holds, delete their driver from it to restart the
// kubelet, and to force one interleaving of two registrations.
//
//go:linkname kubeletDrivers k8s.io/kubernetes/pkg/volume/csi.csiDrivers
var kubeletDrivers *kubeletcsi.DriversStore

// csiHandler is the CSI plugin of k8s.io/kubernetes/pkg/volume/csi,
// initialised once per process (its state is package-level, as in the
// kubelet) on a fake volume host whose API client is a fake clientset.
type csiHandler struct {
	client *fakeclient.Clientset // fake: records every write
	root   string                // the fake volume host's directory
}

var (
	kubeletOnce sync.Once
	kubelet     *csiHandler
)

func theCSIHandler(t *testing.T) *csiHandler {
	kubeletOnce.Do(func() {
		client := fakeclient.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
		factory := informers.NewSharedInformerFactory(client, time.Minute)
		drivers := factory.Storage().V1().CSIDrivers()
		attachments := factory.Storage().V1().VolumeAttachments()
		driverLister, attachmentLister := drivers.Lister(), attachments.Lister()
		stop := make(chan struct{}) // the process's life
		factory.Start(stop)
		for typ, ok := range factory.WaitForCacheSync(stop) {
			if !ok {
				t.Fatalf("informer of %v did not sync", typ)
			}
		}
		root, err := os.MkdirTemp("", "pm-volumehost")
		if err != nil {
			t.Fatal(err)
		}
		// Init of the CSI plugin sets the handler's node info manager
		// and creates the CSINode; the host waits for that.
		volumetest.NewFakeKubeletVolumeHostWithCSINodeName(t, root, client, kubeletcsi.ProbeVolumePlugins(),
			nodeName, driverLister, attachmentLister)
		kubelet = &csiHandler{client: client, root: root}
	})
	if kubelet == nil {
		t.Fatal("the CSI plugin did not initialise")
	}
	return kubelet
}

// csiNodeHas reports whether the CSINode lists the driver now.
func (k *csiHandler) csiNodeHas(t *testing.T, driver string) bool {
	n, err := k.client.StorageV1().CSINodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get CSINode: %v", err)
	}
	return slices.ContainsFunc(n.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
}

// csiNodeWrites returns, for each write of the CSINode after the first
// `from` actions of the client, whether it lists the driver.
func (k *csiHandler) csiNodeWrites(driver string, from int) []bool {
	var out []bool
	for _, a := range k.client.Actions()[from:] {
		var obj *storagev1.CSINode
		// A create or an update (clienttesting.CreateAction and
		// UpdateAction have the same methods: one case).
		if a, ok := a.(clienttesting.CreateAction); ok {
			obj, _ = a.GetObject().(*storagev1.CSINode)
		}
		if obj == nil {
			continue
		}
		out = append(out, slices.ContainsFunc(obj.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }))
	}
	return out
}

// gaps counts how often a write of the CSINode dropped the driver after
// one that listed it: each is a moment the driver was unregistered.
func gaps(writes []bool) int {
	n, had := 0, false
	for _, has := range writes {
		if had && !has {
			n++
		}
		had = has
	}
	return n
}

// ---- the handler's calls --------------------------------------------------------

// handlerCall is one call of the plugin manager to the CSI handler.
type handlerCall struct {
	op       string // validate, register, deregister
	endpoint string
	version  string
	err      error
	at       time.Time
}

// recordingHandler passes every call of the plugin manager to the CSI
// handler on and records it.
type recordingHandler struct {
	inner handler
	mu    sync.Mutex
	calls []handlerCall
}

func (h *recordingHandler) record(c handlerCall) {
	c.at = time.Now()
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
}

func (h *recordingHandler) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	err := h.inner.ValidatePlugin(ctx, name, endpoint, versions)
	h.record(handlerCall{op: "validate", endpoint: endpoint, version: strings.Join(versions, ","), err: err})
	return err
}

func (h *recordingHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	err := h.inner.RegisterPlugin(ctx, name, endpoint, versions, timeout)
	h.record(handlerCall{op: "register", endpoint: endpoint, version: strings.Join(versions, ","), err: err})
	return err
}

func (h *recordingHandler) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	h.inner.DeRegisterPlugin(ctx, name, endpoint)
	h.record(handlerCall{op: "deregister", endpoint: endpoint})
}

// firstAfter returns when the first successful call of op after since
// returned (zero: none).
func (h *recordingHandler) firstAfter(op string, since time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.calls {
		if c.op == op && c.err == nil && c.at.After(since) {
			return c.at
		}
	}
	return time.Time{}
}

// count returns how many calls of op on endpoint ("" any) happened since `since`.
func (h *recordingHandler) count(op, endpoint string, since time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if c.op == op && (endpoint == "" || c.endpoint == endpoint) && !c.at.Before(since) {
			n++
		}
	}
	return n
}

func (h *recordingHandler) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, c := range h.calls {
		fmt.Fprintf(&b, "  %s %s %s %s", c.at.Format("15:04:05.000"), c.op, filepath.Base(filepath.Dir(c.endpoint)), c.version)
		if c.err != nil {
			fmt.Fprintf(&b, " err=%v", c.err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ---- drivers ----------------------------------------------------------------------

// driver is a CSI driver instance: Identity and Node on its own socket.
// NodeGetInfo fails while failInfo is set.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	name     string
	label    string // the instance it belongs to (world.endpoint's answer)
	sock     string
	failInfo atomic.Bool
	nodeID   string       // NodeGetInfo's node ID; "" is nodeName
	infos    atomic.Int64 // NodeGetInfo calls
	caps     atomic.Int64 // NodeGetCapabilities calls
	srv      *grpc.Server
}

func startDriver(t *testing.T, dir, name string, failInfo bool) *driver {
	return startDriverAt(t, filepath.Join(dir, "csi.sock"), name, failInfo)
}

// startDriverAt is startDriver on the socket sock. Its label (world.endpoint's
// answer) is the socket's name without ".sock", or for csi.sock its
// directory's name.
func startDriverAt(t *testing.T, sock, name string, failInfo bool, nodeID ...string) *driver {
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	label := strings.TrimSuffix(filepath.Base(sock), ".sock")
	if filepath.Base(sock) == "csi.sock" {
		label = filepath.Base(filepath.Dir(sock))
	}
	d := &driver{name: name, label: label, sock: sock}
	if len(nodeID) > 0 {
		d.nodeID = nodeID[0]
	}
	d.failInfo.Store(failInfo)
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	d.srv = grpc.NewServer()
	csi.RegisterIdentityServer(d.srv, d)
	csi.RegisterNodeServer(d.srv, d)
	go func() { _ = d.srv.Serve(ln) }()
	t.Cleanup(d.srv.Stop)
	return d
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "test"}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	d.infos.Add(1)
	if d.failInfo.Load() {
		return nil, status.Error(codes.Unavailable, "this instance's NodeGetInfo fails (test)")
	}
	id := nodeName
	if d.nodeID != "" {
		id = d.nodeID
	}
	return &csi.NodeGetInfoResponse{NodeId: id}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	d.caps.Add(1)
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// ---- registrars -------------------------------------------------------------------

// instance is one csi-registrar in the rolling-update mode, for one driver
// instance (one pod).
type instance struct {
	label  string
	log    *testLog // the registrar's log lines
	r      *registrar.Registrar
	cancel context.CancelFunc
	done   chan error
}

func registrarOptions(d *driver, regDir, podUID string) registrar.Options {
	return registrar.Options{
		CSIAddress:              d.sock,
		KubeletRegistrationPath: d.sock, // the kubelet runs here: the same path
		PluginRegistrationPath:  regDir,
		RollingUpdate:           podUID,
		KubeletWait:             registrar.MinKubeletWait,
	}
}

func startInstance(t *testing.T, label string, d *driver, regDir, podUID string) *instance {
	opts := registrarOptions(d, regDir, podUID)
	log := newTestLog(t, "registrar "+label+": ")
	opts.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{}))
	r, err := registrar.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	i := &instance{label: label, log: log, r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { i.done <- r.Run(ctx) }()
	t.Cleanup(func() { i.stop(t) })
	return i
}

// stop ends the registrar as a terminating pod's would end (SIGTERM).
func (i *instance) stop(t *testing.T) {
	if i.cancel == nil {
		return
	}
	i.cancel()
	i.cancel = nil
	select {
	case err := <-i.done:
		if err != nil {
			t.Errorf("registrar %s: Run: %v", i.label, err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("registrar %s did not stop within 20s", i.label)
	}
}

// ---- a registrar in a child process (scenario 4) ------------------------------------

// runChild runs a registrar with the JSON options of childEnv until killed.
func runChild(js string) {
	var opts registrar.Options
	if err := json.Unmarshal([]byte(js), &opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	r, err := registrar.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := r.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// ---- one scenario's world -----------------------------------------------------------

// world is one test's node: a registration directory watched by the
// kubelet's plugin manager, whose CSI handler calls are recorded.
type world struct {
	t       *testing.T
	dir     string // everything of this test
	reg     string // plugins_registry
	name    string // the driver's name (one per test: the handler is per process)
	kubelet *csiHandler
	h       *recordingHandler
	pm      *kubeletPM
	klog    *testLog // the kubelet's log lines
	from    int      // the fake client's actions before this test
	drivers []*driver
}

func newWorld(t *testing.T, driverName string) *world {
	return newWorldPeriod(t, driverName, kubeletPeriod)
}

// newWorldPeriod is newWorld with the kubelet's reconciler running every
// period.
func newWorldPeriod(t *testing.T, driverName string, period time.Duration) *world {
	k := theCSIHandler(t)
	kl := newTestLog(t, "kubelet: ")
	klogTarget.Store(kl)
	t.Cleanup(func() { klogTarget.Store(nil) })
	// Short: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "pm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &world{t: t, dir: dir, reg: filepath.Join(dir, "reg"), name: driverName, kubelet: k, klog: kl,
		h: &recordingHandler{inner: theCSIPluginHandler()}, from: len(k.client.Actions())}
	if err := os.Mkdir(w.reg, 0o750); err != nil {
		t.Fatal(err)
	}
	w.pm = startPluginManager(t, w.reg, w.h, period)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the kubelet's state:\n%s", w.pm.state())
			t.Logf("the CSI handler's calls:\n%s", w.h)
			t.Logf("CSINode writes (lists %s): %v", w.name, w.writes())
		}
	})
	return w
}

func (w *world) driver(label string, failInfo bool) *driver {
	d := startDriver(w.t, filepath.Join(w.dir, label), w.name, failInfo)
	w.drivers = append(w.drivers, d)
	return d
}

// endpoint returns the label of the driver instance whose endpoint the
// CSI handler holds for the driver now ("" when the driver is not
// registered): read from the handler's in-memory driver store, which every
// CSI call of the kubelet dials.
func (w *world) endpoint() string {
	d, ok := kubeletDrivers.Get(w.name)
	if !ok {
		return ""
	}
	ep := resolveLink(fieldString(d, "endpoint"))
	for _, drv := range w.drivers {
		if drv.sock == ep {
			return drv.label
		}
	}
	return "? " + ep
}

// resolveLink returns what a symbolic link at path names (the handover's
// endpoint link), as connect(2) follows it; path itself when it is none.
func resolveLink(path string) string {
	to, err := os.Readlink(path)
	if err != nil {
		return path
	}
	if !filepath.IsAbs(to) {
		to = filepath.Join(filepath.Dir(path), to)
	}
	return to
}

// fieldString reads an unexported string field of a kubelet struct.
func fieldString(v any, field string) string { return reflect.ValueOf(v).FieldByName(field).String() }

func (w *world) writes() []bool { return w.kubelet.csiNodeWrites(w.name, w.from) }

// eventually waits up to d for cond.
func (w *world) eventually(d time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEndpoint waits until the handler dials the instance label.
func (w *world) waitEndpoint(d time.Duration, label string) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := w.endpoint()
		if got == label {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the CSI handler's endpoint is %q after %s, want %q", got, d, label)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitStage(w *world, i *instance, d time.Duration, st registrar.Stage) {
	w.t.Helper()
	w.eventually(d, fmt.Sprintf("registrar %s at stage %v (now %v)", i.label, st, i.r.Status().Stage), func() bool {
		return i.r.Status().Stage == st
	})
}

// announcements lists the announcement sockets in the registration directory.
func (w *world) announcements() []string {
	entries, err := os.ReadDir(w.reg)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-reg.sock") {
			out = append(out, e.Name())
		}
	}
	return out
}

var _ io.Writer = (*testLog)(nil)
