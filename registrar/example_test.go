package registrar_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
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
	// Wait until it answers, not only exists: the file is there from bind(2),
	// a moment before listen(2) (a kubelet retries a refused dial).
	exampleWaitUntil(func() bool {
		c, err := net.Dial("unix", regSock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	reg, err := registrartest.Register(ctx, regSock)
	if err != nil || reg.Err != nil {
		log.Fatal(err, reg)
	}
	fmt.Println(reg.Info.Type, reg.Info.Name, reg.Info.SupportedVersions, "node", reg.NodeInfo.GetNodeId())
	exampleWaitUntil(func() bool { return r.Status().Stage == registrar.StageRegistered })
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

// exampleWaitUntil polls cond for up to 10 s.
func exampleWaitUntil(cond func() bool) {
	if !poll(5*time.Millisecond, 10*time.Second, cond) {
		log.Fatal("timed out")
	}
}
