package registrar_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// A Registrar is created with New and runs until its context ends, as the
// `csi-registrar register` sidecar runs it. Here the CSI driver is the
// reference one, the kubelet's plugins_registry is a temporary directory, and
// registrartest plays the kubelet: it finds <driver>-reg.sock, calls GetInfo,
// then the driver's NodeGetInfo, and confirms with NotifyRegistrationStatus.
//
// A driver that registers itself runs the same Registrar in its own process,
// once its CSI socket listens (see stubdriver.Options.Register).
func Example() {
	dir, err := os.MkdirTemp("", "reg")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	csiSock := filepath.Join(dir, "csi.sock")
	registry := filepath.Join(dir, "plugins_registry") // on a node: /var/lib/kubelet/plugins_registry
	if err := os.Mkdir(registry, 0o750); err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// The CSI driver.
	drv, err := stubdriver.New(stubdriver.Options{Endpoint: csiSock, NodeID: "node-1", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	drvDone := make(chan error, 1)
	go func() { drvDone <- drv.Run(ctx) }()

	// The registrar. The driver may start before or after it.
	r, err := registrar.New(registrar.Options{
		CSIAddress: csiSock,
		// The driver socket as the kubelet dials it: a host path, usually
		// /var/lib/kubelet/plugins/<driver>/csi.sock. Here host = container.
		KubeletRegistrationPath: csiSock,
		PluginRegistrationPath:  registry,
		Logger:                  quiet,
	})
	if err != nil {
		log.Fatal(err) // a *csiplugin.ValidationError naming the option and the rule
	}
	regDone := make(chan error, 1)
	go func() { regDone <- r.Run(ctx) }()

	// The kubelet.
	regSock := filepath.Join(registry, stubdriver.DefaultName+csiplugin.RegistrationSocketSuffix)
	// A kubelet finds the socket by its file event; here the registrar's Status
	// says when it serves it: "waiting for kubelet" once the socket listens.
	exampleAwait(r, registrar.StageWaitingForKubelet)
	reg, err := registrartest.Register(ctx, regSock)
	if err != nil || reg.Err != nil {
		log.Fatal(err, reg)
	}
	fmt.Println(reg.Info.Type, reg.Info.Name, reg.Info.SupportedVersions, "node", reg.NodeInfo.GetNodeId())
	exampleAwait(r, registrar.StageRegistered)
	fmt.Println(r.Status())

	stop() // the registrar removes its socket; the driver removes its own
	if err := <-regDone; err != nil {
		log.Fatal(err)
	}
	if err := <-drvDone; err != nil {
		log.Fatal(err)
	}
	_, err = os.Stat(regSock)
	fmt.Println("registration socket removed:", os.IsNotExist(err))
	// Output:
	// CSIPlugin stub.csi.example.com [1.0.0] node node-1
	// registered
	// registration socket removed: true
}

// exampleAwait waits, at most 10 s, until r's stage is stage, looking at
// each change of its Status (WatchStatus's channel closes at the next one).
func exampleAwait(r *registrar.Registrar, stage registrar.Stage) {
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		st, changed := r.WatchStatus()
		if st.Stage == stage {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			log.Fatalf("status %q after 10 s, want %s", st, stage)
		}
	}
}
