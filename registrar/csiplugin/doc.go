// Package csiplugin holds the facts of the kubelet's plugin registration and
// of CSI that every part of csi-registrar (and a driver author) relies on,
// each stated once: the names, limits and deadlines the kubelet and the API
// server impose, the rules for driver names, node IDs and socket paths with
// the errors that explain them, CSI endpoint parsing, the identity of a
// socket file, and the gRPC dialer for a unix socket.
//
// It is a leaf: it imports neither client-go nor the registrar's control
// loop, so a driver can use it to check its own configuration.
package csiplugin
