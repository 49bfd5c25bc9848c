// Package storage is `make e2e-storage` (storage.mk): Kubernetes' External
// storage e2e tests against a test-driver definition on the local node or
// kind, built and run offline. Its test (storage_test.go, build tag e2e)
// brings the cluster up, loads the images, deploys the driver and runs the
// suite through internal/storagee2e, which `kubectl csi-registrar
// storage-e2e` runs too; build-e2e.sh builds the e2e test binary through
// internal/e2ebinary (builde2e/), images.sh the images its pods run.
package storage
