package registrar_test

// In-process benchmarks of the registration path (issue 6). They run only with
// -bench (make test compiles them): the process-level figures, measured on
// the shipped binary against upstream, are in
// cmd/csi-registrar/process_bench_test.go (`make bench`).
//
//	go test ./registrar -run '^$' -bench . -benchmem

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

const benchDriver = "bench.csi.example.com"

// benchSetup serves the reference driver and returns its socket and a
// registration directory.
func benchSetup(b *testing.B) (driverSock, regDir string) {
	b.Helper()
	d, err := os.MkdirTemp("", "crb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	driverSock, regDir = filepath.Join(d, "csi.sock"), filepath.Join(d, "reg")
	if err := os.Mkdir(regDir, 0o750); err != nil {
		b.Fatal(err)
	}
	drv, err := stubdriver.New(stubdriver.Options{Endpoint: driverSock, Name: benchDriver, NodeID: "node-1",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	benchRun(b, drv.Run)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := registrartest.WaitPath(ctx, driverSock); err != nil || !isSocket(driverSock) {
		b.Fatalf("the driver socket: %v", err)
	}
	return driverSock, regDir
}

// benchRun runs run until the benchmark ends and returns a function that
// stops it and waits for it.
func benchRun(b *testing.B, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	b.Cleanup(stop)
	return stop
}

func benchRegistrar(b *testing.B, driverSock, regDir string) *registrar.Registrar {
	b.Helper()
	r, err := registrar.New(registrar.Options{CSIAddress: driverSock, KubeletRegistrationPath: driverSock,
		PluginRegistrationPath: regDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// answersGetInfo reports whether path is a socket that answers GetInfo now.
func answersGetInfo(path string) bool {
	if !isSocket(path) {
		return false
	}
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = registerapi.NewRegistrationClient(cc).GetInfo(ctx, &registerapi.InfoRequest{})
	return err == nil
}

// waitAnswering spins until the registration socket answers GetInfo: the
// benchmarks measure that moment, as the kubelet sees it, to 50 µs.
// (Tests wait on the Status instead: awaitStatus.)
func waitAnswering(b *testing.B, path string) {
	if !poll(50*time.Microsecond, patience, func() bool { return answersGetInfo(path) }) {
		b.Fatalf("%s does not answer GetInfo", path)
	}
}

// BenchmarkRunToServing: the driver is serving; Run until the registration
// socket answers GetInfo (figure 1 without process start-up).
func BenchmarkRunToServing(b *testing.B) {
	driverSock, regDir := benchSetup(b)
	regSock := filepath.Join(regDir, benchDriver+"-reg.sock")
	for b.Loop() {
		r := benchRegistrar(b, driverSock, regDir)
		stop := benchRun(b, r.Run)
		waitAnswering(b, regSock)
		b.StopTimer()
		stop()
		b.StartTimer()
	}
}

// BenchmarkSocketRecreated: the registration socket is deleted; until the
// new one answers GetInfo (figure 3).
func BenchmarkSocketRecreated(b *testing.B) {
	driverSock, regDir := benchSetup(b)
	regSock := filepath.Join(regDir, benchDriver+"-reg.sock")
	benchRun(b, benchRegistrar(b, driverSock, regDir).Run)
	waitAnswering(b, regSock)
	for b.Loop() {
		if err := os.Remove(regSock); err != nil {
			b.Fatal(err)
		}
		waitAnswering(b, regSock)
	}
}

// BenchmarkGetInfo: GetInfo calls from parallel kubelet-like clients, one
// connection each (figure 9 in one process).
func BenchmarkGetInfo(b *testing.B) {
	driverSock, regDir := benchSetup(b)
	regSock := filepath.Join(regDir, benchDriver+"-reg.sock")
	benchRun(b, benchRegistrar(b, driverSock, regDir).Run)
	waitAnswering(b, regSock)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		cc, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Error(err)
			return
		}
		defer cc.Close()
		client := registerapi.NewRegistrationClient(cc)
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// poll looks at cond every interval until it holds (true) or timeout passed
// (false).
func poll(interval, timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	look := time.NewTicker(interval)
	defer look.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return false
		case <-look.C:
		}
	}
	return true
}
