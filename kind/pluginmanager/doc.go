// Package pluginmanager holds tests only: the kubelet's own plugin manager
// (k8s.io/kubernetes/pkg/kubelet/pluginmanager) and CSI registration handler
// (k8s.io/kubernetes/pkg/volume/csi) run in this process against real
// csi-registrar Registrars in the rolling-update mode and real CSI drivers,
// over real unix sockets. Each test drives one ordering that a real kubelet
// cannot be made to produce on demand (docs/operating.md, "Rolling updates and maxSurge").
//
// No API server runs here: the CSI handler writes the Node and CSINode
// objects through a fake clientset (client-go's fake), which records each
// write; that record, the handler's calls and the endpoint the handler
// dials are what the tests assert on.
package pluginmanager
