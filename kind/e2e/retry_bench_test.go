//go:build bench && !e2e

package e2e

// Figure 10: what a rejection costs, and how fast its repair registers, with
// the real kubelet of the local node, whatever Kubernetes version it runs
// (make bench-retry runs it on each). Kubelets before 1.36 never retry a
// rejected registration: only a new socket makes them try again. From 1.36
// (kubernetes/kubernetes PR #133335) the kubelet forgets a plugin whose
// registration failed and its reconciler tries the same socket again.
//
// The case is the e2e suite's case 6: the driver reports a topology label the
// Node already has with another value, so the kubelet's CSI handler fails.
// For BENCH_RETRY_OBSERVE (60 s) the run counts what happens per minute: the
// registrar's GetInfo answers, socket creations and Notify outcomes (its
// /metrics), the kubelet's registration attempts (its log), and CSINode
// changes. Then the label is removed and the time until the kubelet lists the
// driver, and until the registrar's /readyz says 200, is measured.
// The registrar runs with its defaults, as a user would run it.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchKubeletRetry(t *testing.T) {
	e := loadLocalEnv(t)
	ours := impls(t)[0].bin
	observe := time.Duration(envInt("BENCH_RETRY_OBSERVE", 60)) * time.Second
	kubeletLog := filepath.Join(e.cache, "logs", "kubelet.log")
	version := kubeletVersion(t, e)

	w := watchCSINode(t, e)
	cleanNode(t, w)

	name := benchPrefix + "retry" + benchSuffix
	key := "topology." + name + "/zone"
	kubectl := func(args ...string) {
		t.Helper()
		cmd := exec.Command(e.kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("label", "node", e.node, "--overwrite", key+"=collision")
	t.Cleanup(func() {
		cmd := exec.Command(e.kubectl, "label", "node", e.node, key+"-")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
		cmd.Run()
	})

	p := newPair(t, impl{"ours", ours}, name)
	p.drv = start(t, ours, "driver", "--endpoint=unix://"+p.sock, "--driver-name="+name,
		"--node-id="+e.node, "--topology="+key+"=zone-a")
	waitSocket(t, p.sock)
	addr := freeLoopbackAddr(t)
	logFile := filepath.Join(os.TempDir(), "bench-retry-registrar.log")
	p.reg = startLogged(t, logFile, ours, "register", "--csi-address="+p.sock, "--kubelet-registration-path="+p.sock,
		"--plugin-registration-path="+pluginsRegistry, "--http-endpoint="+addr, "-v=2")
	t.Logf("kubelet %s; registrar log: %s", version, logFile)

	// The first rejection starts the clock.
	var first metricValues
	deadline := time.Now().Add(30 * time.Second)
	for {
		first = scrape(t, addr)
		if first.get("csi_registrar_kubelet_notifications_total", `outcome="rejected"`) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rejection within 30 s (metrics: %v)", first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	logFrom := fileSize(kubeletLog)
	csinodeFrom := w.mark()
	t0 := time.Now()
	time.Sleep(observe)
	last := scrape(t, addr)
	elapsed := time.Since(t0)
	perMin := func(d float64) float64 { return d / elapsed.Minutes() }
	attempts := countIn(kubeletLog, logFrom, "OperationExecutor.RegisterPlugin started")
	failures := countIn(kubeletLog, logFrom, "RegisterPlugin error -- plugin registration failed")
	csinodeChanges := w.mark() - csinodeFrom

	delta := func(name, label string) float64 { return last.get(name, label) - first.get(name, label) }
	creations := 0.0
	for k, v := range last {
		if strings.HasPrefix(k, "csi_registrar_socket_creations_total") {
			creations += v - first[k]
		}
	}
	what := func(s string) string { return fmt.Sprintf("kubelet %s, rejected: %s", version, s) }
	one := func(v float64) []float64 { return []float64{v} }
	benchRecord(t, "10a", what("GetInfo calls / min"), one(perMin(delta("csi_registrar_getinfo_calls_total", ""))), nil, "", nil, "")
	benchRecord(t, "10b", what("kubelet registration attempts / min (its log)"), one(perMin(float64(attempts))), nil, "", nil, "")
	benchRecord(t, "10c", what("kubelet CSI handler failures / min (its log)"), one(perMin(float64(failures))), nil, "", nil, "")
	benchRecord(t, "10d", what("Notify(false) / min"), one(perMin(delta("csi_registrar_kubelet_notifications_total", `outcome="rejected"`))), nil, "", nil, "")
	benchRecord(t, "10e", what("registration sockets created / min"), one(perMin(creations)), nil, "", nil, "")
	benchRecord(t, "10f", what("CSINode changes / min"), one(perMin(float64(csinodeChanges))), nil, "", nil, "")

	// The repair.
	from := w.mark()
	tFix := time.Now()
	kubectl("label", "node", e.node, key+"-")
	tListed, ok := w.waitFrom(from, 6*time.Minute, hasAll([]string{name}))
	if !ok {
		t.Fatalf("kubelet %s: %s not listed in CSINode within 6 min of the label fix", version, name)
	}
	var tReady time.Time
	for tReady.IsZero() {
		if code, _ := readyz(addr); code == http.StatusOK {
			tReady = time.Now()
			break
		}
		if time.Since(tFix) > 6*time.Minute {
			t.Fatalf("kubelet %s: /readyz not 200 within 6 min of the label fix", version)
		}
		time.Sleep(20 * time.Millisecond)
	}
	benchRecord(t, "10g", fmt.Sprintf("kubelet %s: label fixed → CSINode lists the driver", version), one(tListed.Sub(tFix).Seconds()), nil, "", nil, "")
	benchRecord(t, "10h", fmt.Sprintf("kubelet %s: label fixed → registrar /readyz 200", version), one(tReady.Sub(tFix).Seconds()), nil, "", nil, "")
	saveLog(kubeletLog, logFrom, filepath.Join(os.TempDir(), "bench-retry-kubelet.log"))

	p.reg.stop()
	p.drv.stop()
	cleanNode(t, w)
}

// kubeletVersion is the node's kubelet version, as its Node object reports it.
func kubeletVersion(t *testing.T, e localEnv) string {
	t.Helper()
	cmd := exec.Command(e.kubectl, "get", "node", e.node, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl get node: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// startLogged is start with the process's output in a file.
func startLogged(t *testing.T, logFile, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = ownStateFile(t)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metricValues maps a series ("name{labels}") to its value.
type metricValues map[string]float64

func (m metricValues) get(name, labels string) float64 {
	if labels == "" {
		return m[name]
	}
	for k, v := range m {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, labels) {
			return v
		}
	}
	return 0
}

// scrape reads the registrar's /metrics (Prometheus text format).
func scrape(t *testing.T, addr string) metricValues {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return metricValues{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return metricValues{}
	}
	m, err := ParseMetrics(string(body))
	if err != nil {
		t.Logf("%s/metrics: %v", addr, err)
		return metricValues{}
	}
	return metricValues(m)
}

func readyz(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
