// Package e2ebinary builds Kubernetes' e2e test binary, `go test -c` of
// k8s.io/kubernetes/test/e2e, at one Kubernetes release, with Go and the
// module proxy only, and keeps it in a cache directory keyed by the release.
//
// k8s.io/kubernetes is not meant to be imported: its go.mod replaces the
// k8s.io staging modules (k8s.io/api, k8s.io/client-go, ...) with
// ./staging paths inside its own repository, which a module that requires
// it does not have. ModuleFile writes the go.mod of a module that can build
// its packages anyway, by replacing each staging module with its published
// version (v0.MINOR.PATCH for Kubernetes v1.MINOR.PATCH). That rule lives
// here only: the nested modules of kind/localnode/k8sbuild are generated
// with it too (kind/localnode/k8sbuild/gen-gomod.sh).
//
// Build is what `kubectl csi-registrar storage-e2e` and `make e2e-storage`
// use: it generates such a module in the cache directory, resolves it with
// `go mod tidy` and compiles the e2e package; a binary built before with the
// same recipe is used as it is, without the go command. A cold build takes
// about 25 CPU-minutes; with the Go build cache warm from the same release,
// a minute or two.
package e2ebinary
