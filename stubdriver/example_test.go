package stubdriver_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
		log.Fatal(err) // a *registrar.ValidationError naming the value and the rule
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
