# ---------------------------------------------------------------------------
# Kubernetes' External storage e2e tests (k8s.io/kubernetes/test/e2e/storage/external)
# against a test-driver definition (kind/storage): the e2e test binary is built at the
# node's Kubernetes version (K8S=1.35…1.37) by build-e2e.sh, through the Go code that builds
# it for `kubectl csi-registrar storage-e2e` (internal/e2ebinary) and into its cache
# (~/.cache/csi-registrar/e2e/<version>; cold: ~25 CPU-minutes), the busybox image its pods
# run is built here, the driver is deployed, and the suite runs and is judged as that
# command runs and judges it (internal/storagee2e): passed/skipped/failed, every run-time
# skip explained by the definition, and for the reference driver every spec of
# kind/storage/expected-pass.txt passed.
# DRIVER_DEF: the definition (default: the reference driver's); DRIVER (kustomize dir or
# manifest, default manifests/) and DRIVER_IMAGES (archives) deploy the driver it describes.
# E2E_PROVIDER=kind runs it on kind as e2e-kind does; both under the node lock.
STORAGE_DEF_REF := manifests/examples/storage-e2e/stub.csi.example.com.yaml
DRIVER_DEF      ?= $(STORAGE_DEF_REF)
STORAGE_OUT     ?= bin/e2e/storage
STORAGE_TEST    ?= bin/e2e/storage.test
# The expected-pass list applies to the reference driver's definition only.
STORAGE_EXPECT  ?= $(if $(filter $(abspath $(STORAGE_DEF_REF)),$(abspath $(DRIVER_DEF))),kind/storage/expected-pass.txt)
STORAGE_ARGS     = -test.run='^TestExternalStorage$$' -definition=$(abspath $(DRIVER_DEF)) -driver=$(abspath $(or $(DRIVER),manifests)) \
	-e2e-test=$$(bash kind/storage/build-e2e.sh --path) -repo-list=$(abspath $(STORAGE_OUT))/repo-list.yaml \
	-images=$(subst $(e2e_space),$(e2e_comma),$(abspath $(STORAGE_OUT)/busybox.tar $(subst $(e2e_comma), ,$(DRIVER_IMAGES)))) \
	-out=$(abspath $(STORAGE_OUT)) $(if $(STORAGE_EXPECT),-expected=$(abspath $(STORAGE_EXPECT)))
.PHONY: e2e-storage e2e-storage-build

# Everything built before the lock is taken: the csi-registrar image manifests/ runs,
# the e2e binary (kind/storage/build-e2e.sh), the suite's images, the runner.
e2e-storage-build:
	@[ -r "$(DRIVER_DEF)" ] || { echo "DRIVER_DEF=$(DRIVER_DEF): cannot read it (want a test-driver definition, e.g. a copy of $(STORAGE_DEF_REF))" >&2; exit 2; }
	@mkdir -p $(dir $(E2E_IMAGE_TAR)) $(STORAGE_OUT)
	$(MAKE) --no-print-directory image IMAGE_TAR=$(E2E_IMAGE_TAR)
	bash kind/storage/build-e2e.sh
	bash kind/storage/images.sh "$$(bash kind/storage/build-e2e.sh --path)" $(STORAGE_OUT)
	$(GO) test -tags e2e -c -o $(STORAGE_TEST) ./kind/storage

e2e-storage: e2e-storage-build ## Kubernetes' External storage e2e on a driver: [DRIVER_DEF=definition.yaml DRIVER=... DRIVER_IMAGES=...] (local node; E2E_PROVIDER=kind)
	@if [ "$${E2E_PROVIDER:-local}" = kind ]; then \
	  $(call with_node_lock,env E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) E2E_TEST=$(STORAGE_TEST) E2E_TIMEOUT=$(E2E_TIMEOUT) E2E_KEEP=$(E2E_KEEP) bash kind/e2e/kind.sh $(STORAGE_ARGS)); \
	else \
	  $(call with_node_lock,env E2E_PROVIDER=local E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) $(STORAGE_TEST) -test.v -test.count=1 -test.timeout=$(E2E_TIMEOUT) $(STORAGE_ARGS)); \
	fi
