package csiplugin

import "time"

// Facts of the kubelet's plugin manager (pkg/kubelet/pluginmanager) and its
// CSI handler (pkg/volume/csi), as of Kubernetes 1.37.
const (
	// PluginsRegistryDir is the name of the directory, under the kubelet's
	// root directory, whose sockets the kubelet's plugin watcher registers.
	PluginsRegistryDir = "plugins_registry"
	// DefaultKubeletDir is the kubelet's default --root-dir.
	DefaultKubeletDir = "/var/lib/kubelet"

	// RegistrationSocketSuffix is appended to the driver name to form the
	// registration socket's file name, as the kubelet's plugin watcher expects.
	RegistrationSocketSuffix = "-reg.sock"

	// GetInfoTimeout is the kubelet's hard-coded deadline of its GetInfo
	// call on a registration socket.
	GetInfoTimeout = time.Second
	// NotifyTimeout is the kubelet's deadline of NotifyRegistrationStatus.
	NotifyTimeout = 5 * time.Second
	// NodeGetInfoTimeout is the kubelet's CSI handler's deadline of
	// NodeGetInfo on the driver's endpoint.
	NodeGetInfoTimeout = 2 * time.Minute

	// NodeIDAnnotation is the Node annotation the kubelet's CSI handler keeps
	// as a JSON map {driver name: node ID}.
	NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"
	// MaxNodeIDLength is the longest node ID, in bytes, the API server
	// accepts in CSINode.
	MaxNodeIDLength = 192
	// MaxDriverNameLength is the longest driver name the CSI specification
	// and the API server's CSINode validation accept.
	MaxDriverNameLength = 63
)

// NotKubeletUserAgent starts the gRPC user agent of the callers of GetInfo
// that are not the kubelet: `csi-registrar doctor` and the registrar's own
// reconcile. A registration server answers them like any other but does not
// take their GetInfo for the kubelet's: a GetInfo ends the wait for the
// kubelet, and looking must not change what the registrar does.
const NotKubeletUserAgent = "csi-registrar-not-kubelet"
