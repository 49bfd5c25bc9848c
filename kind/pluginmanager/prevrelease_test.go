package pluginmanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// prevAnnouncement plays a pod of the previous release's rolling-update
// mode (before the handover): its registrar announced the driver on a
// socket of its own, <prefix>_<instance>_<v>-reg.sock, at the CSI version
// 1.<v>.0 (v a Unix time in milliseconds), with its own driver's socket as
// the endpoint. Leaving with no successor in that mode, it unlinked its
// announcement by name, which makes the kubelet unregister the driver.
type prevAnnouncement struct {
	path string
	srv  *grpc.Server
}

type prevRegistration struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
}

func (p prevRegistration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return p.info, nil
}

func (p prevRegistration) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

// startPrevAnnouncement announces d in regDir as the previous release's
// instance of pod podUID did.
func startPrevAnnouncement(t *testing.T, regDir, driverName, podUID string, d *driver) *prevAnnouncement {
	t.Helper()
	v := uint64(time.Now().UnixMilli())
	p := &prevAnnouncement{path: filepath.Join(regDir, csiplugin.RollingUpdateSocketName(driverName, csiplugin.InstanceID(podUID), v))}
	l, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	registerapi.RegisterRegistrationServer(p.srv, prevRegistration{info: &registerapi.PluginInfo{Type: registerapi.CSIPlugin,
		Name: driverName, Endpoint: d.sock, SupportedVersions: []string{csiplugin.RollingUpdateVersion(v)}}})
	go func() { _ = p.srv.Serve(l) }() // ends with stop
	t.Cleanup(p.stop)
	return p
}

// stop is the instance leaving with no successor in its mode: it stops
// serving and unlinks its announcement by name.
func (p *prevAnnouncement) stop() {
	p.srv.Stop()
	_ = os.Remove(p.path)
}
