// Package registrartest acts toward a registration socket exactly as the
// kubelet's plugin manager and CSI plugin handler do, so that a registrar (or
// a driver that registers itself) can be tested without a kubelet: dial the
// socket, GetInfo under the kubelet's 1 s deadline, check the answer as the
// kubelet checks it, call NodeGetInfo on the announced endpoint, and report
// the verdict with NotifyRegistrationStatus.
package registrartest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registration is what one kubelet-style registration saw.
type Registration struct {
	Info     *registerapi.PluginInfo
	NodeInfo *csi.NodeGetInfoResponse
	// Err is the reason the registration was rejected (nil if accepted); it
	// was sent to the registrar with NotifyRegistrationStatus.
	Err error
}

// Register performs the kubelet's registration of the plugin behind
// socketPath: GetInfo, validation, NodeGetInfo on the endpoint, then
// NotifyRegistrationStatus with the outcome. The returned error is about
// talking to the sockets; a rejection is reported in Registration.Err.
func Register(ctx context.Context, socketPath string) (*Registration, error) {
	conn, err := dial(socketPath)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	info, err := GetInfo(ctx, client)
	if err != nil {
		return nil, err
	}
	reg := &Registration{Info: info}
	reg.Err = CheckInfo(info)
	if reg.Err == nil {
		reg.NodeInfo, reg.Err = NodeGetInfo(ctx, endpointOf(info, socketPath))
	}
	status := &registerapi.RegistrationStatus{PluginRegistered: reg.Err == nil}
	if reg.Err != nil {
		status.Error = reg.Err.Error()
	}
	if err := Notify(ctx, client, status); err != nil {
		return reg, err
	}
	return reg, nil
}

// Reject acts as a kubelet whose RegisterPlugin failed: on one connection,
// GetInfo, then NotifyRegistrationStatus{PluginRegistered: false, Error:
// reason}. A kubelet before 1.36 does this once per socket; from 1.36 it
// does it again on the same socket after its own backoff (500 ms doubling to
// about 2 min) until it succeeds: call Reject again to play that kubelet.
func Reject(ctx context.Context, socketPath, reason string) error {
	conn, err := dial(socketPath)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	if _, err := GetInfo(ctx, client); err != nil {
		return err
	}
	return Notify(ctx, client, &registerapi.RegistrationStatus{PluginRegistered: false, Error: reason})
}

// GetInfo calls GetInfo with the kubelet's 1 s deadline.
func GetInfo(ctx context.Context, client registerapi.RegistrationClient) (*registerapi.PluginInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, csiplugin.GetInfoTimeout)
	defer cancel()
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("GetInfo: %w", err)
	}
	return info, nil
}

// Notify calls NotifyRegistrationStatus with the kubelet's 5 s deadline.
func Notify(ctx context.Context, client registerapi.RegistrationClient, st *registerapi.RegistrationStatus) error {
	ctx, cancel := context.WithTimeout(ctx, csiplugin.NotifyTimeout)
	defer cancel()
	if _, err := client.NotifyRegistrationStatus(ctx, st); err != nil {
		return fmt.Errorf("NotifyRegistrationStatus: %w", err)
	}
	return nil
}

// NotifySocket dials socketPath and sends one NotifyRegistrationStatus.
func NotifySocket(ctx context.Context, socketPath string, registered bool, errMsg string) error {
	conn, err := dial(socketPath)
	if err != nil {
		return err
	}
	defer conn.Close()
	return Notify(ctx, registerapi.NewRegistrationClient(conn),
		&registerapi.RegistrationStatus{PluginRegistered: registered, Error: errMsg})
}

// GetInfoSocket dials socketPath and calls GetInfo once.
func GetInfoSocket(ctx context.Context, socketPath string) (*registerapi.PluginInfo, error) {
	conn, err := dial(socketPath)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return GetInfo(ctx, registerapi.NewRegistrationClient(conn))
}

// CheckInfo validates GetInfo's answer as the kubelet's CSI handler does.
func CheckInfo(info *registerapi.PluginInfo) error {
	if info.Type != registerapi.CSIPlugin {
		return fmt.Errorf("plugin type %q is not %q", info.Type, registerapi.CSIPlugin)
	}
	if info.Name == "" {
		return errors.New("plugin name is empty")
	}
	if len(info.SupportedVersions) == 0 {
		return errors.New("no supported versions")
	}
	highest := ""
	for _, v := range info.SupportedVersions {
		if !strings.HasPrefix(strings.TrimPrefix(v, "v"), "1.") {
			continue
		}
		if v > highest {
			highest = v
		}
	}
	if highest == "" {
		return fmt.Errorf("supported versions %v contain no 1.x version", info.SupportedVersions)
	}
	return nil
}

// NodeGetInfo calls the driver's NodeGetInfo at endpoint (a socket path).
func NodeGetInfo(ctx context.Context, endpoint string) (*csi.NodeGetInfoResponse, error) {
	conn, err := dial(endpoint)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, csiplugin.NodeGetInfoTimeout)
	defer cancel()
	rsp, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("NodeGetInfo on %s: %w", endpoint, err)
	}
	if rsp.GetNodeId() == "" {
		return nil, fmt.Errorf("NodeGetInfo on %s: empty node ID", endpoint)
	}
	return rsp, nil
}

// endpointOf is where the kubelet dials the driver: the announced endpoint,
// or the registration socket itself when the endpoint is empty.
func endpointOf(info *registerapi.PluginInfo, socketPath string) string {
	if info.Endpoint == "" {
		return socketPath
	}
	return info.Endpoint
}

func dial(path string) (*grpc.ClientConn, error) {
	return csiplugin.Dial(path)
}
