package pluginmanager

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The handover (docs/design.md, "The handover") against the kubelet's own
// plugin manager and CSI handler: each row of TestHandoverOutcomes is one
// sequence of a node plugin's life, and what the kubelet must have done
// by its end: how many times its CSI handler registered and deregistered
// the driver, and which driver its stored endpoint reaches.

// handoverNode is a handover world: the driver sockets' shared directory.
type handoverNode struct {
	*world
	csi string
}

func newHandoverNode(t *testing.T, driverName string) *handoverNode {
	w := newWorld(t, driverName)
	n := &handoverNode{world: w, csi: filepath.Join(w.dir, "csi")}
	if err := os.Mkdir(n.csi, 0o750); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *handoverNode) link() string { return filepath.Join(n.csi, "csi-endpoint.sock") }

// pod starts a driver and a registrar with the handover on label.sock.
func (n *handoverNode) pod(label string) (*instance, *driver) {
	d := n.handoverDriver(label, "")
	return n.start(label, n.handoverOptions(d, label)), d
}

// handoverDriver starts a driver on label.sock (nodeID: NodeGetInfo's, ""
// for the node's name).
func (n *handoverNode) handoverDriver(label, nodeID string) *driver {
	d := startDriverAt(n.t, filepath.Join(n.csi, label+".sock"), n.name, false, nodeID)
	n.drivers = append(n.drivers, d)
	return d
}

func (n *handoverNode) handoverOptions(d *driver, label string) registrar.Options {
	opts := registrarOptions(d, n.reg, podUIDOf(label))
	return opts
}

// plain starts a driver and a registrar without any mode (as
// node-driver-registrar: the plain path, its own socket, an unlink by name
// at exit) on label.sock.
func (n *handoverNode) plain(label string) (*instance, *driver) {
	d := startDriverAt(n.t, filepath.Join(n.csi, label+".sock"), n.name, false)
	n.drivers = append(n.drivers, d)
	opts := registrarOptions(d, n.reg, "")
	opts.RollingUpdate = ""
	opts.RegistrationRetryMax = time.Second
	return n.start(label, opts), d
}

func (n *handoverNode) start(label string, opts registrar.Options) *instance {
	log := newTestLog(n.t, "registrar "+label+": ")
	opts.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{}))
	r, err := registrar.New(opts)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	i := &instance{label: label, log: log, r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { i.done <- r.Run(ctx) }()
	n.t.Cleanup(func() { i.stop(n.t) })
	return i
}

func podUIDOf(label string) string {
	const base = "00000000-0000-4000-8000-000000000000"
	return base[:len(base)-len(label)] + label
}

// reaches is the driver the kubelet's stored endpoint reaches now: its
// NodeGetInfo through that endpoint, as the kubelet dials it, counted by
// the driver that answers ("" when none answers).
func (n *handoverNode) reaches() string {
	d, ok := kubeletDrivers.Get(n.name)
	if !ok {
		return ""
	}
	ep := fieldString(d, "endpoint")
	before := map[*driver]int64{}
	for _, drv := range n.drivers {
		before[drv] = drv.infos.Load()
	}
	conn, err := csiplugin.Dial(ep)
	if err != nil {
		return ""
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil {
		return ""
	}
	for _, drv := range n.drivers {
		if drv.infos.Load() > before[drv] {
			return filepath.Base(drv.sock)
		}
	}
	return "?"
}

func (n *handoverNode) waitReaches(label string) {
	n.t.Helper()
	n.eventually(15*time.Second, "the kubelet's endpoint reaches "+label, func() bool { return n.reaches() == label+".sock" })
}

// outcome is what the kubelet did from a row's start to its end.
type outcome struct{ registers, deregisters int }

func (o outcome) String() string {
	return fmt.Sprintf("%d register, %d deregister", o.registers, o.deregisters)
}

// outcomes are the outcomes a row allows.
type outcomes []outcome

func (os outcomes) String() string {
	var s []string
	for _, o := range os {
		s = append(s, o.String())
	}
	return strings.Join(s, " or ")
}

func (os outcomes) has(o outcome) bool { return slices.Contains(os, o) }

func (n *handoverNode) since(t0 time.Time) outcome {
	return outcome{n.h.count("register", "", t0), n.h.count("deregister", "", t0)}
}

// registered waits for the first registration of the driver.
func (n *handoverNode) registered(label string) time.Time {
	n.t.Helper()
	n.eventually(15*time.Second, "the driver registered", func() bool { return n.h.count("register", "", time.Time{}) > 0 })
	n.waitReaches(label)
	return time.Now()
}

// overlap is a rollout's overlap: pod a registered, then pod b started and
// the kubelet's endpoint reaching it; db is b's driver.
func (n *handoverNode) overlap() (a, b *instance, db *driver) {
	n.t.Helper()
	a, _ = n.pod("a")
	n.registered("a")
	b, db = n.pod("b")
	n.waitReaches("b")
	return a, b, db
}

// handoverRows are the sequences; each returns when its last step is done,
// and the kubelet's calls are counted over three of its rounds more.
var handoverRows = []struct {
	name string
	want outcomes
	run  func(n *handoverNode) (reaches string)
}{
	{"rollout (maxSurge 1), twice", outcomes{{0, 0}}, func(n *handoverNode) string {
		a, b, _ := n.overlap()
		waitStage(n.world, b, 10*time.Second, registrar.StageRegistered)
		a.stop(n.t)
		c, _ := n.pod("c")
		n.waitReaches("c")
		waitStage(n.world, c, 10*time.Second, registrar.StageRegistered)
		b.stop(n.t)
		return "c"
	}},
	{"undo mid-rollout (the new pod deleted)", outcomes{{0, 0}}, func(n *handoverNode) string {
		_, b, _ := n.overlap()
		b.stop(n.t)
		return "a"
	}},
	{"pod deleted, its replacement starts within the wait", outcomes{{0, 0}}, func(n *handoverNode) string {
		a, _ := n.pod("a")
		n.registered("a")
		stopped := make(chan struct{})
		go func() { a.stop(n.t); close(stopped) }()
		time.Sleep(500 * time.Millisecond) // the replacement pod's start, after the deletion (an ordering, not a wait for a state)
		n.pod("b")
		<-stopped
		return "b"
	}},
	{"kubelet restart while two instances run", outcomes{{1, 0}}, func(n *handoverNode) string {
		a, _, _ := n.overlap()
		n.restartKubelet(n.t)
		n.eventually(15*time.Second, "registered again after the restart", func() bool { return n.h.count("register", "", time.Now().Add(-time.Minute)) > 1 })
		a.stop(n.t)
		return "b"
	}},
	{"the new driver dies after the swap (the fallback)", outcomes{{0, 0}}, func(n *handoverNode) string {
		_, _, db := n.overlap()
		db.srv.Stop()
		return "a"
	}},
	{"from a registrar without the handover (node-driver-registrar's exit)", outcomes{{1, 1}}, func(n *handoverNode) string {
		p, _ := n.plain("p")
		n.registered("p")
		h, _ := n.pod("h")
		n.eventually(10*time.Second, "h standing by as ready", func() bool {
			st := h.r.Status()
			return st.Stage == registrar.StageStandingBy && st.Fallback
		})
		p.stop(n.t)
		waitStage(n.world, h, 15*time.Second, registrar.StageRegistered)
		return "h"
	}},
	{"undo of the first rollout from such a registrar (F1)", outcomes{{0, 0}}, func(n *handoverNode) string {
		n.plain("p")
		n.registered("p")
		h, _ := n.pod("h")
		n.eventually(10*time.Second, "h standing by as ready", func() bool { return h.r.Status().Stage == registrar.StageStandingBy })
		h.stop(n.t)
		return "p"
	}},
	{"the new driver's NodeGetInfo differs (a new node ID): registered again once, on purpose", outcomes{{1, 1}}, func(n *handoverNode) string {
		n.pod("a")
		n.registered("a")
		d := n.handoverDriver("b", "another-node-id")
		b := n.start("b", n.handoverOptions(d, "b"))
		n.waitReaches("b")
		waitStage(n.world, b, 15*time.Second, registrar.StageRegistered)
		return "b"
	}},
	{"a lone registrar killed (SIGKILL), its container restarted", outcomes{{1, 1}}, func(n *handoverNode) string {
		d := n.handoverDriver("a", "")
		a := startChild(n.t, "a", n.handoverOptions(d, "a"))
		n.registered("a")
		n.waitConfirmed(n.t, a)
		a.kill()
		n.start("a", n.handoverOptions(d, "a"))
		n.eventually(15*time.Second, "registered again", func() bool { return n.h.count("register", "", time.Time{}) > 1 })
		return "a"
	}},
	// The restarted kubelet's dial of the dead socket (gRPC retries it for
	// 10 s) may reach the socket renamed over it: it registers on the old
	// identity first, then on the new one.
	{"reboot: the kubelet starts with a dead socket, the pod starts again", outcomes{{1, 1}, {2, 1}}, func(n *handoverNode) string {
		d := n.handoverDriver("a", "")
		a := startChild(n.t, "a", n.handoverOptions(d, "a"))
		n.registered("a")
		n.waitConfirmed(n.t, a)
		n.pm.halt()
		a.kill()
		kubeletDrivers.Delete(n.name)
		n.pm = startPluginManager(n.t, n.reg, n.h, n.pm.period)
		n.pm.waitRounds(n.t, 2) // the kubelet dials the dead socket before the pod starts again
		n.start("a", n.handoverOptions(d, "a"))
		n.eventually(30*time.Second, "registered again", func() bool { return n.h.count("register", "", time.Time{}) > 1 })
		return "a"
	}},
	{"from the rolling-update mode without the handover (its announcement at 1.<ms>.0)", outcomes{{1, 1}}, func(n *handoverNode) string {
		d := n.handoverDriver("m", "")
		m := startPrevAnnouncement(n.t, n.reg, n.name, podUIDOf("m"), d)
		n.registered("m")
		h, _ := n.pod("h")
		n.eventually(10*time.Second, "h standing by as ready", func() bool {
			st := h.r.Status()
			return st.Stage == registrar.StageStandingBy && st.Fallback
		})
		m.stop()
		waitStage(n.world, h, 20*time.Second, registrar.StageRegistered)
		return "h"
	}},
	{"back to a registrar without the handover (maxUnavailable 1)", outcomes{{1, 1}}, func(n *handoverNode) string {
		h, _ := n.pod("h")
		n.registered("h")
		h.stop(n.t)
		p, _ := n.plain("p")
		waitStage(n.world, p, 15*time.Second, registrar.StageRegistered)
		return "p"
	}},
}

func TestHandoverOutcomes(t *testing.T) {
	for i, row := range handoverRows {
		t.Run(row.name, func(t *testing.T) {
			n := newHandoverNode(t, fmt.Sprintf("handover-%d.csi.example.com", i))
			want := row.run(n)
			// What the sequence cost the kubelet is counted after its first
			// registration of the driver.
			t0 := n.h.firstAfter("register", time.Time{})
			n.pm.waitRounds(t, 3)
			got := n.since(t0.Add(time.Millisecond))
			reach := n.reaches()
			t.Logf("%s: %s; the kubelet's endpoint reaches %s", row.name, got, reach)
			if !row.want.has(got) {
				t.Errorf("the kubelet's CSI handler: %s after the first registration, want %s\n%s", got, row.want, n.h)
			}
			if reach != want+".sock" {
				t.Errorf("the kubelet's endpoint reaches %q, want %s.sock", reach, want)
			}
		})
	}
}

var updateHandoverDoc = flag.Bool("update-handover-doc", false, "write the handover's table of outcomes into docs/design.md")

const (
	handoverDocPath  = "../../docs/design.md"
	handoverDocBegin = "<!-- handover outcomes: generated from kind/pluginmanager/handover_test.go; do not edit -->"
	handoverDocEnd   = "<!-- end of handover outcomes -->"
)

// TestHandoverTableInDesignDoc checks that docs/design.md shows the table
// TestHandoverOutcomes runs.
func TestHandoverTableInDesignDoc(t *testing.T) {
	doc, err := os.ReadFile(handoverDocPath)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| sequence | the kubelet's CSI handler after the first registration |\n|---|---|\n")
	for _, r := range handoverRows {
		fmt.Fprintf(&b, "| %s | %s |\n", r.name, r.want)
	}
	want := handoverDocBegin + "\n\n" + b.String() + "\n" + handoverDocEnd
	re := regexp.MustCompile("(?s)" + regexp.QuoteMeta(handoverDocBegin) + ".*?" + regexp.QuoteMeta(handoverDocEnd))
	if !re.Match(doc) {
		t.Fatalf("%s has no block between %q and %q", handoverDocPath, handoverDocBegin, handoverDocEnd)
	}
	if string(re.Find(doc)) == want {
		return
	}
	if *updateHandoverDoc {
		if err := os.WriteFile(handoverDocPath, re.ReplaceAllLiteral(doc, []byte(want)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s does not show the handover's table; run make test-pluginmanager K8S_MINORS=1.37 PM_RUN=TestHandoverTableInDesignDoc with -update-handover-doc (go test -tags k8s_1_37 -run TestHandoverTableInDesignDoc . -update-handover-doc). Want:\n%s", handoverDocPath, want)
}
