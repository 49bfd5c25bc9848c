package stubdriver_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// A driver's main validates its options with New, then serves the CSI socket
// with Run until its context ends. In a real driver the context comes from
// signal.NotifyContext(ctx, syscall.SIGTERM), the endpoint is the socket the
// registrar's --csi-address points at (e.g. unix:///csi/csi.sock) and the node
// ID comes from the downward API (spec.nodeName).
func ExampleNew() {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")

	d, err := stubdriver.New(stubdriver.Options{
		Endpoint:      "unix://" + sock,
		VendorVersion: "v0.1.0",
		NodeID:        "node-1",
		Topology:      map[string]string{"topology.stub.csi.example.com/zone": "zone-a"},
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err) // a *csiplugin.ValidationError naming the value and the rule
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	// What the registrar does first: ask the driver for its name.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{},
		grpc.WaitForReady(true)) // the socket may not be there yet
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.GetName(), info.GetVendorVersion())
	conn.Close()

	stop() // Run stops serving and removes the socket
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	_, err = os.Stat(sock)
	fmt.Println("socket removed:", os.IsNotExist(err))
	// Output:
	// stub.csi.example.com v0.1.0
	// socket removed: true
}

// With Options.Register the driver registers itself with the kubelet: no
// registrar sidecar. Run serves the CSI socket, then the registration socket
// <PluginRegistrationPath>/<name>-reg.sock, and removes both, registration
// first, when its context ends. Here registrartest plays the kubelet.
func ExampleNew_register() {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	registry := filepath.Join(dir, "registry") // on a node: /var/lib/kubelet/plugins_registry
	if err := os.Mkdir(registry, 0o750); err != nil {
		log.Fatal(err)
	}

	var logs registrartest.Buffer // the driver's and its registrar's log
	d, err := stubdriver.New(stubdriver.Options{
		Endpoint: "unix://" + sock,
		NodeID:   "node-1",
		Register: &registrar.Options{
			// The CSI socket as the kubelet dials it, a host path: usually
			// /var/lib/kubelet/plugins/<name>/csi.sock. Here host = container.
			KubeletRegistrationPath: sock,
			PluginRegistrationPath:  registry,
		},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	regSock := filepath.Join(registry, stubdriver.DefaultName+csiplugin.RegistrationSocketSuffix)
	// The registrar creates its socket once the driver serves. Its file
	// appears at bind(2), an instant before the socket listens (the kubelet
	// retries a refused dial); the registrar logs once it serves: wait for that.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := logs.Wait(wctx, func(s string) bool { return strings.Contains(s, "registration socket created") }); err != nil {
		log.Fatal(err)
	}
	reg, err := registrartest.Register(ctx, regSock)
	if err != nil || reg.Err != nil {
		log.Fatal(err, reg)
	}
	fmt.Println("registered", reg.Info.Name, "on", reg.NodeInfo.GetNodeId())

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	for _, p := range []string{regSock, sock} {
		_, err := os.Stat(p)
		fmt.Println(filepath.Base(p), "removed:", os.IsNotExist(err))
	}
	// Output:
	// registered stub.csi.example.com on node-1
	// stub.csi.example.com-reg.sock removed: true
	// csi.sock removed: true
}

// With Options.StateDir the driver serves CSI ephemeral volumes. This is what
// the kubelet sends for a pod's inline volume (spec.volumes[].csi) of a
// CSIDriver with podInfoOnMount: true; the driver bind-mounts
// <StateDir>/<volume ID> at the target path. It needs root (mount(2)), so this
// example is compiled, not run; publish_test.go runs the same calls.
func ExampleDriver_Run_ephemeral() {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	d, err := stubdriver.New(stubdriver.Options{
		Endpoint: "unix://" + sock,
		NodeID:   "node-1",
		StateDir: filepath.Join(dir, "state"), // in a pod: a hostPath
		// Targets must be below it; in a pod: /var/lib/kubelet/pods (the default).
		KubeletPodsDir: filepath.Join(dir, "pods"),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go d.Run(ctx)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	node := csi.NewNodeClient(conn)
	// The kubelet creates the target's parent; the driver creates the target.
	target := filepath.Join(dir, "pods", "uid", "volumes", "kubernetes.io~csi", "data", "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		log.Fatal(err)
	}
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId:   "csi-0123abcd", // the kubelet's: "csi-" and a SHA-256
		TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: map[string]string{stubdriver.EphemeralContextKey: "true"},
	}, grpc.WaitForReady(true))
	if err != nil {
		log.Fatal(err)
	}
	// The pod writes at the target; the data is in <StateDir>/csi-0123abcd.
	// When the pod goes, the kubelet unpublishes: unmount, then remove the
	// target and the volume's directory.
	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-0123abcd", TargetPath: target}); err != nil {
		log.Fatal(err)
	}
}
