//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The fake instances of TestKubeletDeregistration (deregister_test.go).

// fakeInstance is one fake instance of fakeDriverName on this machine: a
// registration socket in the kubelet's plugins_registry and a CSI endpoint
// that answers NodeGetInfo (or fails it), both real gRPC servers.
type fakeInstance struct {
	id, version, regPath, endpoint string
	status                         chan *registerapi.RegistrationStatus
	servers                        []*grpc.Server
}

func startFakeInstance(dir, id, version, nodeID string, failing bool) (*fakeInstance, error) {
	f := &fakeInstance{
		id: id, version: version,
		regPath:  filepath.Join(PluginsRegistry, fakeDriverName+"-"+id+"-reg.sock"),
		endpoint: filepath.Join(dir, id+".sock"),
		status:   make(chan *registerapi.RegistrationStatus, 8),
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	csiSrv := grpc.NewServer()
	csi.RegisterNodeServer(csiSrv, fakeNode{nodeID: nodeID, failing: failing})
	if err := f.serve(csiSrv, f.endpoint); err != nil {
		return nil, err
	}
	regSrv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regSrv, fakeRegistration{f: f})
	if err := f.serve(regSrv, f.regPath); err != nil {
		f.remove()
		return nil, err
	}
	return f, nil
}

func (f *fakeInstance) serve(s *grpc.Server, path string) error {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	f.servers = append(f.servers, s)
	go func() { _ = s.Serve(l) }() // ends with s.Stop in remove
	return nil
}

// remove unlinks the registration socket by name (what the kubelet's plugin
// watcher sees as the instance leaving), then stops the servers.
func (f *fakeInstance) remove() {
	_ = os.Remove(f.regPath)
	for _, s := range f.servers {
		s.Stop()
	}
	f.servers = nil
	_ = os.Remove(f.endpoint)
}

type fakeRegistration struct {
	registerapi.UnimplementedRegistrationServer
	f *fakeInstance
}

func (r fakeRegistration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: fakeDriverName, Endpoint: r.f.endpoint, SupportedVersions: []string{r.f.version}}, nil
}

func (r fakeRegistration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	select {
	case r.f.status <- st:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// fakeNode answers the one CSI call the kubelet makes at registration.
type fakeNode struct {
	csi.UnimplementedNodeServer
	nodeID  string
	failing bool
}

func (n fakeNode) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if n.failing {
		return nil, status.Error(codes.Unavailable, "fake instance: NodeGetInfo fails on purpose")
	}
	return &csi.NodeGetInfoResponse{NodeId: n.nodeID}, nil
}
