// Package pluginmanager holds tests only: the kubelet's own plugin manager
// (k8s.io/kubernetes/pkg/kubelet/pluginmanager) and CSI registration handler
// (k8s.io/kubernetes/pkg/volume/csi) run in this process against real
// csi-registrar Registrars with the handover (--rolling-update) and real CSI drivers,
// over real unix sockets. Each test drives one ordering that a real kubelet
// cannot be made to produce on demand (docs/operating.md, "Rolling updates and maxSurge").
//
// The plugin manager is built from its exported parts as the kubelet
// builds it (plugin watcher, desired and actual state, reconciler,
// operation executor: kubelet_test.go), so that the tests read the
// kubelet's desired and actual state directly and count its reconciler
// rounds: a proof that something does not happen is an observation window
// of rounds, not a sleep. The same tests run against the kubelet code of
// each supported minor: go.mod is the newest, k8s-<minor>.mod the others
// (pinned as kind/localnode/k8sbuild/<minor>/ pins them; ./gen-modfile.sh),
// selected with -modfile and the build tag k8s_<major>_<minor>; the
// shim_*_test.go files hold what differs between them.
//
// No API server runs here: the CSI handler writes the Node and CSINode
// objects through a fake clientset (client-go's fake), which records each
// write; that record, the handler's calls and the endpoint the handler
// dials are what the tests assert on.
package pluginmanager
