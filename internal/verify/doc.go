// Package verify is `kubectl csi-registrar verify`: the driver registration
// cases of internal/drivercases, run against a driver's manifests on the
// cluster of the current kubeconfig context, with csi-registrar in place of
// node-driver-registrar, judged by the kubelet and the API.
//
// It is disruptive by design: on the node it acts on it restarts the
// kubelet, removes the driver's registration socket and kills the driver's
// container. So it says so before it starts, acts on one node unless told
// otherwise, refuses a cluster where the driver under test is installed, and
// asks for --i-know-this-is-disruptive on nodes without MarkerLabel (which
// the project's local node and kind clusters carry). It never touches an
// object it did not create: what it creates carries RunLabel, is removed at
// the end and on SIGINT/SIGTERM, and --cleanup removes what an earlier run
// left. Node-level actions go through a short-lived privileged pod per node
// (hostPID, the host's network, the host's root at /host) in a namespace of
// its own at the Pod Security level privileged.
package verify
