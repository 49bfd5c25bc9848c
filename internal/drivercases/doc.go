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
//
// The files, by role (a prefix groups each role's files):
//
//   - The cluster model: cluster.go (Cluster, the workload's pods, the
//     registration's facts), cluster_node.go (Node, Dialer, plugins_registry
//     listings), cluster_dial.go, cluster_watch.go (recorders of the Node,
//     CSINode and pods), cluster_leftovers.go, cluster_diagnostics.go,
//     cluster_archive.go, cluster_owner.go. Record and sockowner are its leaf
//     subpackages.
//   - The suite and the cases: run.go (Run, the case names in order),
//     suite.go, check.go (a case's verdict), cases.go (1-5, 7), expect.go,
//     handover.go, mountload.go, modemanifests.go, verifyerr.go (verify's
//     own errors, never the driver's verdict). Driverspec (what the
//     manifests say) and kubeletlog (the kubelet's log lines) are their leaf
//     subpackages.
//   - Readiness (R1-R5, on manifests with the rolling-update mode):
//     readiness*.go, readiness_text.go (its summary, and the expectation
//     file's parser, which knows the case names).
//   - Rollouts: rollout.go (case 6), rollout_faults.go (case 8: rollouts with a
//     fault in each), rollout_gaps.go (the spans unregistered,
//     MeasureGaps), rollout_rolledout.go (a DaemonSet rolled out).
//   - Reporting: package report (Result, Table, LeftText,
//     CheckExpectations), a leaf; report.go names its types here.
//
// Only reporting is a package of its own: the cluster model is used by
// every role and, by name, by verify and the e2e suite, and the cases,
// readiness and the rollouts run on the package's suite and check (the
// gaps need the cluster model's registration facts), so they share this
// package and are told apart by their files' prefixes.
package drivercases
