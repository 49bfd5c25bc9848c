// Package storagee2e runs Kubernetes' External storage e2e tests
// (k8s.io/kubernetes/test/e2e/storage/external) against a CSI driver
// described by a test-driver definition file, on the cluster of a
// kubeconfig, and judges the outcome: the specs that passed, failed, and
// skipped themselves at run time, each skip explained by what the
// definition does not claim.
//
// It is `kubectl csi-registrar storage-e2e` and the run of `make
// e2e-storage` (kind/storage), which brings up the local node or kind and
// deploys the driver first. New checks the options once and returns a
// Suite; Suite.Run finds the API server's version, takes the e2e test
// binary given or builds one at exactly that version (internal/e2ebinary),
// waits until the kubelets have the driver registered, runs the specs of
// the volume types the definition claims, and reads ginkgo's report.
// It never installs the driver: its author deploys it first.
//
// definition.go reads the definition and report.go the suite's report;
// both work on files only, so that their rules are tested without a
// cluster.
package storagee2e
