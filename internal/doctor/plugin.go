package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Plugin is a registration socket's answer to GetInfo.
type Plugin struct {
	Type     string   `json:"type"`
	Name     string   `json:"name"`
	Endpoint string   `json:"endpoint"`
	Versions []string `json:"versions"`
}

// Outcomes of GetInfo (Entry.GetInfo).
const (
	GetInfoAnswered       = "ok"
	GetInfoStale          = "refused (stale)"
	GetInfoHung           = "timeout (hung)"
	GetInfoNotRegistrar   = "not a registration server"
	GetInfoDenied         = "permission denied"
	getInfoFailedPrefixed = "failed: "
)

// inspectSocket calls GetInfo on one registry socket as the kubelet does,
// records the answer in e, and checks the CSI driver it announces.
func (d *diagnosis) inspectSocket(ctx context.Context, e *Entry) {
	if len(e.Path) > csiplugin.MaxSocketPathLength {
		return // nobody can dial it; checkEntry flagged it
	}
	if !d.dialable(e.Path) {
		return
	}
	markInstance(e)
	info, outcome, err := getInfo(ctx, d.local(e.Path))
	e.GetInfo = outcome
	switch outcome {
	case GetInfoAnswered:
	case GetInfoStale:
		if e.Instance != nil {
			return // a rolling-update instance's: told with its driver's live sockets (findOverlaps)
		}
		d.addf(SeverityError, e.Path, "its plugin is gone: remove the file (rm "+e.Path+"), then restart the plugin or its registrar if the driver is still wanted",
			"stale socket: nobody listens on it (connection refused); the kubelet's registration of it fails and retries with backoff up to 2 min")
		return
	case GetInfoHung:
		d.addf(SeverityError, e.Path, "find the process serving it (ss -xlp | grep "+e.Path+") and restart it",
			"hung: it accepts connections but did not answer GetInfo within the kubelet's %s deadline; the kubelet will not register it", csiplugin.GetInfoTimeout)
		return
	case GetInfoNotRegistrar:
		d.addf(SeverityError, e.Path, "keep only registration sockets in plugins_registry: a CSI driver's own socket belongs in <kubelet-dir>/plugins/<driver>/",
			"not a registration server: %v", err)
		return
	case GetInfoDenied:
		d.addf(SeverityError, e.Path, "run doctor as root; check SELinux labels (ls -Z) if it already runs as root",
			"cannot connect: %v", err)
		return
	default:
		d.addf(SeverityError, e.Path, "check the registrar's log", "GetInfo failed: %v", err)
		return
	}
	p := &Plugin{Type: info.GetType(), Name: info.GetName(), Endpoint: info.GetEndpoint(), Versions: info.GetSupportedVersions()}
	e.Plugin = p
	switch p.Type {
	case registerapi.CSIPlugin:
	case registerapi.DRAPlugin, registerapi.DevicePlugin:
		return // other kinds of plugins: listed, not checked
	default:
		d.addf(SeverityError, e.Path, "fix the plugin's registrar: CSI drivers announce type "+registerapi.CSIPlugin,
			"GetInfo type %q: the kubelet has no handler for it and rejects the plugin", p.Type)
		return
	}
	if err := csiplugin.ValidateDriverName(p.Name); err != nil {
		d.addf(SeverityError, e.Path, "fix the name the driver reports (GetPluginInfo) or the registrar's --driver-name",
			"GetInfo announces a driver name the API server refuses in CSINode: %v", err)
	}
	if !hasV1(p.Versions) {
		d.addf(SeverityError, e.Path, "the registrar must announce a 1.x version, e.g. [\"1.0.0\"]",
			"GetInfo versions %q contain no 1.x version: the kubelet rejects the plugin", p.Versions)
	}
	d.inspectDriver(ctx, e)
}

// dialable reports whether this process can dial the host path: under
// HostRoot a path may outgrow a socket address although the kubelet's does
// not. If it cannot, that is a warning: the socket could not be checked.
func (d *diagnosis) dialable(hostPath string) bool {
	local := d.local(hostPath)
	if len(local) <= csiplugin.MaxSocketPathLength {
		return true
	}
	d.addf(SeverityWarning, hostPath, "run doctor on the node itself, without --host-root",
		"not checked: under --host-root the path is %s, %d bytes long, over the %d a unix socket address holds",
		local, len(local), csiplugin.MaxSocketPathLength)
	return false
}

// hasV1 reports whether versions hold a 1.x version, as the kubelet's CSI
// handler requires.
func hasV1(versions []string) bool {
	for _, v := range versions {
		if strings.HasPrefix(strings.TrimPrefix(v, "v"), "1.") || strings.TrimPrefix(v, "v") == "1" {
			return true
		}
	}
	return false
}

// getInfo dials the registration socket at path and calls GetInfo under
// the kubelet's deadline. It tells a stale socket (connection refused) from
// a hung one (no answer in time) and from one that speaks something else.
func getInfo(ctx context.Context, path string) (*registerapi.PluginInfo, string, error) {
	if err := dialCheck(path, csiplugin.GetInfoTimeout); err != nil {
		return nil, classifyDial(err), err
	}
	conn, err := dialGRPC(path, outlastGetInfo)
	if err != nil {
		return nil, getInfoFailedPrefixed + err.Error(), err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, csiplugin.GetInfoTimeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	switch {
	case err == nil:
		return info, GetInfoAnswered, nil
	case status.Code(err) == codes.DeadlineExceeded:
		return nil, GetInfoHung, err
	case status.Code(err) == codes.Unimplemented:
		return nil, GetInfoNotRegistrar, fmt.Errorf("it answers gRPC but does not implement pluginregistration.v1 GetInfo (%s)", status.Convert(err).Message())
	case status.Code(err) == codes.Unavailable:
		// Connected (dialCheck) but no gRPC: it is not an HTTP/2 server.
		return nil, GetInfoNotRegistrar, fmt.Errorf("it accepts connections but does not speak gRPC (%s)", status.Convert(err).Message())
	}
	return nil, getInfoFailedPrefixed + err.Error(), err
}

// dialCheck connects to the unix socket at path once and hangs up.
func dialCheck(path string, timeout time.Duration) error {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return err
	}
	return c.Close()
}

func classifyDial(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return GetInfoStale
	case errors.Is(err, os.ErrPermission):
		return GetInfoDenied
	case errors.As(err, &ne) && ne.Timeout():
		return GetInfoHung // the accept queue is full: nobody accepts
	}
	return getInfoFailedPrefixed + err.Error()
}

// outlastGetInfo lets a connection attempt outlive GetInfo's deadline, so
// that only the deadline ends the call on a hung server (one that accepts
// and never sends its HTTP/2 settings): DeadlineExceeded, "hung". With the
// attempt bounded by the same second (csiplugin.Dial's MinConnectTimeout)
// both timers expire together and whichever goroutine runs first decides;
// when the attempt's end won, the call failed Unavailable, which getInfo
// reads as "does not speak gRPC". A server that closes the connection or
// answers something else than HTTP/2 still ends the attempt at once, and
// the client is closed when getInfo returns, ending the attempt with it.
var outlastGetInfo = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           grpcbackoff.DefaultConfig, // an attempt gets the larger of its first delay and MinConnectTimeout
	MinConnectTimeout: 10 * csiplugin.GetInfoTimeout,
})

// dialGRPC makes a gRPC client for the unix socket at path, as the kubelet
// does, with a user agent a registrar does not take for the kubelet's.
func dialGRPC(path string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return csiplugin.Dial(path, append([]grpc.DialOption{grpc.WithUserAgent(csiplugin.NotKubeletUserAgent + " (doctor)")}, opts...)...)
}
