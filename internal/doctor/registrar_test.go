package doctor_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/doctor"
	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// TestDoctorChangesNothing: doctor's GetInfo on a csi-registrar socket is
// answered but not taken for the kubelet's (it would end the registrar's
// wait for the kubelet, --kubelet-wait); a kubelet's GetInfo still is.
// The registrar and the driver are the real ones, in this process.
func TestDoctorChangesNothing(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	drvSock := filepath.Join(n.dir, "csi.sock")
	drv, err := stubdriver.New(stubdriver.Options{Endpoint: drvSock, Name: "s.csi.example.com", NodeID: "node-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var regLog registrartest.Buffer
	reg, err := registrar.New(registrar.Options{CSIAddress: drvSock, KubeletRegistrationPath: drvSock,
		PluginRegistrationPath: n.registry, Logger: slog.New(slog.NewTextHandler(&regLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, ctx, cancel, drv, reg)

	regSock := filepath.Join(n.registry, "s.csi.example.com-reg.sock")
	// The registrar logs this once its socket serves (and then publishes
	// StageWaitingForKubelet).
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := regLog.Wait(wctx, func(s string) bool { return strings.Contains(s, "registration socket created") }); err != nil {
		t.Fatalf("registrar not serving: %v: %v\n%s", err, reg.Status(), regLog.String())
	}

	r := n.run(t, n.opts())
	if len(r.Findings) != 0 || entry(t, r, regSock).Driver == nil {
		t.Fatalf("want the registrar's socket checked, no findings:\n%s", dump(r))
	}
	if got := getInfoCalls(t, reg); got != "0" {
		t.Errorf("after doctor: the registrar counted %s GetInfo calls from the kubelet, want 0", got)
	}
	if _, err := registrartest.GetInfoSocket(ctx, regSock); err != nil {
		t.Fatal(err)
	}
	if got := getInfoCalls(t, reg); got != "1" {
		t.Errorf("after a kubelet's GetInfo: %s GetInfo calls counted, want 1", got)
	}
}

// getInfoCalls reads csi_registrar_getinfo_calls_total from the registrar's
// /metrics (counted before GetInfo returns).
func getInfoCalls(t *testing.T, reg *registrar.Registrar) string {
	t.Helper()
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "csi_registrar_getinfo_calls_total "); ok {
			return v
		}
	}
	t.Fatalf("no csi_registrar_getinfo_calls_total in /metrics:\n%s", rec.Body.String())
	return ""
}

// TestDoctorHandoverLink: with the handover, the endpoint the kubelet dials
// is the link csi-endpoint.sock; doctor follows it, names its target and
// checks the driver behind it.
func TestDoctorHandoverLink(t *testing.T) {
	n := newNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	csiDir := filepath.Join(n.dir, "plugin")
	if err := os.Mkdir(csiDir, 0o750); err != nil {
		t.Fatal(err)
	}
	drvSock := filepath.Join(csiDir, "pod-a.sock")
	drv, err := stubdriver.New(stubdriver.Options{Endpoint: drvSock, Name: "h.csi.example.com", NodeID: "node-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registrar.New(registrar.Options{CSIAddress: drvSock, KubeletRegistrationPath: drvSock,
		PluginRegistrationPath: n.registry, RollingUpdate: "00000000-0000-4000-8000-0000000000aa", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, ctx, cancel, drv, reg)
	regSock := filepath.Join(n.registry, "h.csi.example.com-reg.sock")
	link := filepath.Join(csiDir, "csi-endpoint.sock")
	deadline := time.Now().Add(10 * time.Second)
	for t1, _ := os.Readlink(link); t1 != "pod-a.sock"; t1, _ = os.Readlink(link) {
		if time.Now().After(deadline) {
			t.Fatalf("no endpoint link to pod-a.sock: %v", reg.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := n.run(t, n.opts())
	e := entry(t, r, regSock)
	if e.Driver == nil || e.Driver.Link != "pod-a.sock" || e.Driver.Endpoint != link || e.Driver.NodeID != "node-1" {
		t.Fatalf("want the link followed to pod-a.sock and its driver checked:\n%s", dump(r))
	}
	wantFinding(t, r, doctor.SeverityInfo, "h.csi.example.com", "is a link to pod-a.sock")
}

// runUntilCleanup runs drv and reg, each in a goroutine, until ctx ends; the
// test's cleanup calls cancel and waits for both to return.
func runUntilCleanup(t *testing.T, ctx context.Context, cancel context.CancelFunc, drv *stubdriver.Driver, reg *registrar.Registrar) {
	done := make(chan struct{}, 2)
	go func() { drv.Run(ctx); done <- struct{}{} }()
	go func() { reg.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
}
