// Package drivercases runs the registration cases that make sense for any
// CSI driver on that driver's own manifests: deployed, registrar pod
// deleted, kubelet restarted, registration socket removed, driver container
// killed, rollout (the workload rolled as its manifests say: how long the
// driver was unregistered, how many inline-volume mounts failed; judged only
// with csi-registrar's rolling-update mode), uninstalled. Each case is judged by what the kubelet and the API
// say (the CSINode entry, the Node annotation, the registration socket in
// plugins_registry, the kubelet's own log), never by a registrar's logs, so
// one run judges csi-registrar, upstream node-driver-registrar or a driver
// that registers in-process alike.
//
// `kubectl csi-registrar verify` (internal/verify) runs them on any cluster,
// its node-level actions through a privileged pod; the e2e suites (kind/e2e)
// through their providers. Both hand Run a Cluster: client-go, kubectl, and a
// Node that does what the API cannot (restart the kubelet, remove a file,
// kill a container, list plugins_registry, read the kubelet's log, run the
// socket owner search). client-go is here: never in the image's binary.
package drivercases
