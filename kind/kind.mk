# The demo and the end-to-end suite. Included by the top-level Makefile.
.PHONY: demo demo-down kind-node-image

demo: ## build, bring up a cluster (kind when Docker answers or KIND=1, else the local node: K8S=1.34…1.37), deploy manifests/, show what the kubelet wrote
	@$(call with_node_lock,bash kind/demo/demo.sh up)

kind-node-image: ## kind node image built here, no registry needed (K8S=1.34…1.37, newest by default; cached: seconds when current)
	bash kind/cluster/nodeimage/build.sh

demo-down: ## tear the demo down (no process, mount or socket left)
	@$(call with_node_lock,bash kind/demo/demo.sh down)

# ---------------------------------------------------------------------------
# End-to-end suite (kind/e2e, build tag e2e; see kind/e2e/README.md).
# The local node is one shared resource: every use of it runs under its lock
# (with_node_lock, kind/nodelock.sh).
E2E_IMAGE_TAR  ?= bin/e2e/image.tar
E2E_TIMEOUT    ?= 40m
E2E_TEST       ?= bin/e2e/e2e.test
# e.g. E2E_ARGS='-test.run=TestE2E/4_'
E2E_RUN         = $(E2E_TEST) -test.v -test.count=1 -test.timeout=$(E2E_TIMEOUT) $(E2E_ARGS)
.PHONY: e2e e2e-kind e2e-build

# The image in its own archive (a concurrent `make image` cannot swap bin/image.tar
# under the suite) and the compiled suite: both built before the lock is taken.
e2e-build:
	@mkdir -p $(dir $(E2E_IMAGE_TAR)) $(dir $(E2E_TEST))
	$(MAKE) --no-print-directory image IMAGE_TAR=$(E2E_IMAGE_TAR)
	$(GO) test -tags e2e -c -o $(E2E_TEST) ./kind/e2e

e2e: e2e-build ## end-to-end suite on the local node: up if needed, 7 cases, torn down (E2E_KEEP=1 keeps it)
	@$(call with_node_lock,env E2E_PROVIDER=local E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) \
	  E2E_UPSTREAM_REGISTRAR_ARCHIVE=$(if $(E2E_UPSTREAM_REGISTRAR_ARCHIVE),$(abspath $(E2E_UPSTREAM_REGISTRAR_ARCHIVE))) $(E2E_RUN))

# node-driver-registrar's image, built from its source archive (kind/images/upstream-image.sh:
# go build -mod=vendor, FROM scratch, upstream's image name; cached), and the side-by-side
# migration rows on the local node's newest kubelet (kind/e2e/migration_test.go): an
# upstream DaemonSet rolled to upstream, to csi-registrar without the mode, into the mode, and back.
# Its source: ../shared/upstream beside this checkout, else beside the repository it was cloned from.
UPSTREAM_SRC_NAME  := shared/upstream/node-driver-registrar-v2.17.0.tar.gz
UPSTREAM_SRC       ?= $(firstword $(wildcard ../$(UPSTREAM_SRC_NAME) $(addsuffix /../$(UPSTREAM_SRC_NAME),$(shell git config --get remote.origin.url 2>/dev/null))) ../$(UPSTREAM_SRC_NAME))
UPSTREAM_IMAGE     ?= registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0
UPSTREAM_IMAGE_TAR ?= bin/upstream-image.tar
.PHONY: upstream-image e2e-migration
upstream-image: ## node-driver-registrar's image from its source ($(UPSTREAM_SRC)) in $(UPSTREAM_IMAGE_TAR), for side-by-side runs (cached)
	@mkdir -p $(dir $(UPSTREAM_IMAGE_TAR)) $(BUILDAH_ROOT)
	@BUILDAH="$(BUILDAH)" bash kind/images/upstream-image.sh $(UPSTREAM_SRC) $(UPSTREAM_IMAGE) $(UPSTREAM_IMAGE_TAR)
e2e-migration: upstream-image ## first rollout of an upstream DaemonSet: to upstream, to csi-registrar, into the mode, and back (a rollback); unregistered time and failed mounts per row; then an undo of the first rollout (issue 43's F1) (local node)
	@$(MAKE) --no-print-directory e2e E2E_UPSTREAM_REGISTRAR_ARCHIVE=$(UPSTREAM_IMAGE_TAR) E2E_ARGS=\''-test.run=^(TestMigrationFromUpstream|TestUndoFirstRolloutFromUpstream)$$$$'\'

# The Node Readiness Controller's image (kubernetes-sigs/node-readiness-controller), built
# from a git clone of its source (kind/images/node-readiness-controller-image.sh: the tag extracted
# under bin/, modules through the Go module proxy, FROM scratch; cached), and its CRD beside
# the archive: TestNodeReadinessController (kind/e2e/nodereadiness_controller_test.go) runs
# when E2E_NRC_ARCHIVE names them. NRC_SRC: the clone's git directory.
NRC_SRC       ?= /work/.mirror/kubernetes-sigs+node-readiness-controller/repo
NRC_TAG       ?= v0.5.0
NRC_IMAGE     ?= localhost/node-readiness-controller:$(NRC_TAG)
NRC_IMAGE_TAR ?= bin/node-readiness-controller-image.tar
.PHONY: node-readiness-controller-image
node-readiness-controller-image: ## the Node Readiness Controller's image from its source (NRC_SRC=<git dir>, NRC_TAG=$(NRC_TAG)) in $(NRC_IMAGE_TAR), its CRD beside it (cached)
	@mkdir -p $(dir $(NRC_IMAGE_TAR)) $(BUILDAH_ROOT)
	@BUILDAH="$(BUILDAH)" bash kind/images/node-readiness-controller-image.sh "$(NRC_SRC)" $(NRC_TAG) $(NRC_IMAGE) $(NRC_IMAGE_TAR)

# kind/e2e/kind.sh: kind/cluster/cluster.sh brings the cluster up (a private dockerd and the
# node image built here when no Docker engine or registry answers), the suite runs,
# and everything is removed again and the host checked (E2E_KEEP=1 keeps it). Under
# the node lock: kind's kubelets change the same host-wide kernel state as the local node's.
e2e-kind: e2e-build node-readiness-controller-image ## end-to-end suite on kind: kind/cluster/cluster.yaml's 3 nodes (Docker, else a private dockerd), all removed at the end
	@$(call with_node_lock,$(E2E_KIND_RUN) $(E2E_ARGS))
E2E_KIND_RUN = env E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) E2E_NRC_ARCHIVE=$(CURDIR)/$(NRC_IMAGE_TAR) E2E_TEST=$(E2E_TEST) E2E_TIMEOUT=$(E2E_TIMEOUT) E2E_KEEP=$(E2E_KEEP) bash kind/e2e/kind.sh

# make e2e's tests and verify's R2 and R5 on manifests/ FLAKE_RUNS times each (kind/e2e/flake-check.sh), the
# failure rate per test at the end; each run's output in bin/flake/. Every make target it runs takes the lock.
# It wants FLAKE_MIN_FREE_GIB free on each filesystem the runs write to, before each run (a full disk fails runs
# for the machine, not for a test).
FLAKE_RUNS ?= 10
FLAKE_KINDS ?= e2e verify
FLAKE_MIN_FREE_GIB ?= 10
.PHONY: flake-check
flake-check: ## make e2e's tests and R2/R5 on manifests/ FLAKE_RUNS (10) times each on the local node (~75 min warm), the failure rate per test
	FLAKE_RUNS=$(FLAKE_RUNS) FLAKE_KINDS="$(FLAKE_KINDS)" FLAKE_MIN_FREE_GIB=$(FLAKE_MIN_FREE_GIB) bash kind/e2e/flake-check.sh

# The suite on every Kubernetes version the local node supports, oldest first, under
# one hold of the node's lock; the table goes to bin/e2e/matrix/table.md.
# E2E_VERSIONS="1.34 1.37" limits it; `bash kind/e2e/matrix.sh --table` reprints it.
.PHONY: e2e-matrix
e2e-matrix: ## e2e on Kubernetes 1.34, 1.35, 1.36, 1.37 in turn (local node): a version × case table with the times
	@$(call with_node_lock,bash kind/e2e/matrix.sh $(E2E_VERSIONS))

# ---------------------------------------------------------------------------
# Any driver's manifests, with csi-registrar in place of node-driver-registrar: the
# registration cases that make sense for any driver, run by `kubectl csi-registrar verify`
# (the plugin built from the tree; kind/driver/verify.sh brings the cluster up and loads the
# images). DRIVER is a kustomize directory or a manifest file (comma-separated for several);
# DRIVER_IMAGES the image archives its manifests need. E2E_PROVIDER=kind runs it on kind,
# otherwise on the local node (both under the node lock). COMPARE=<image archive of another
# registrar, e.g. upstream node-driver-registrar> runs the cases again with that registrar
# and prints one table. VERIFY_ARGS: more flags of verify (e.g. --registrar-logs=blocked).
DRIVER        ?=
DRIVER_IMAGES ?=
COMPARE       ?=
VERIFY_ARGS   ?=
# The node pod's image: busybox built here (nothing can be pulled on the local node).
E2E_NODE_IMAGE     ?= localhost/csi-registrar/busybox:verify
E2E_NODE_IMAGE_TAR ?= bin/e2e/node-image.tar
e2e_comma     := ,
e2e_space     := $() $()
e2e_abs        = $(subst $(e2e_space),$(e2e_comma),$(abspath $(subst $(e2e_comma), ,$(1))))
.PHONY: e2e-driver e2e-driver-args e2e-driver-build

# Checked before anything is built.
e2e-driver-args:
	@[ -n "$(DRIVER)" ] || { echo "DRIVER is required: make e2e-driver DRIVER=<kustomize dir or manifest file> [DRIVER_IMAGES=a.tar,b.tar]" >&2; exit 2; }
	@for d in $(subst $(e2e_comma), ,$(DRIVER)); do [ -e "$$d" ] || { echo "DRIVER=$$d: no such file or directory (want a kustomize directory or a manifest file)" >&2; exit 2; }; done
	@for i in $(subst $(e2e_comma), ,$(DRIVER_IMAGES)) $(COMPARE); do [ -r "$$i" ] || { echo "DRIVER_IMAGES/COMPARE: cannot read $$i (want image archives, e.g. from docker save or buildah push docker-archive:FILE)" >&2; exit 2; }; done

# The image in its own archive, the plugin and the node pod's image: built before the lock.
e2e-driver-build:
	@mkdir -p bin/e2e
	$(MAKE) --no-print-directory image IMAGE_TAR=$(E2E_IMAGE_TAR)
	nice -n 10 $(GO) build -o bin/kubectl-csi_registrar ./cmd/kubectl-csi_registrar
	bash kind/storage/busybox-image.sh $(E2E_NODE_IMAGE) $(E2E_NODE_IMAGE_TAR)

E2E_DRIVER_RUN = env PLUGIN=$(CURDIR)/bin/kubectl-csi_registrar IMAGE=$(IMAGE) IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) \
	NODE_IMAGE=$(E2E_NODE_IMAGE) NODE_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_NODE_IMAGE_TAR) \
	DRIVERS=$(call e2e_abs,$(DRIVER)) DRIVER_IMAGES=$(if $(DRIVER_IMAGES),$(call e2e_abs,$(DRIVER_IMAGES))) \
	COMPARE=$(if $(COMPARE),$(abspath $(COMPARE))) VERIFY_ARGS='$(VERIFY_ARGS)' bash kind/driver/verify.sh
e2e-driver: e2e-driver-args e2e-driver-build ## registration cases on your driver (kubectl csi-registrar verify): DRIVER=<kustomize dir|manifest>[,more] [DRIVER_IMAGES=a.tar,b.tar] [COMPARE=other-registrar.tar]
	@$(call with_node_lock,$(E2E_DRIVER_RUN))

# The mode-readiness cases on the non-compliant examples (manifests/examples/notready/):
# each must fail its own case with its own cause (expect.txt), every other case pass;
# what they leave on the node is removed at the end (--remove-left).
NOTREADY_DIR     = manifests/examples/notready
NOTREADY_DRIVERS = $(NOTREADY_DIR)/hostport,$(NOTREADY_DIR)/memvolumes,$(NOTREADY_DIR)/loadatstart,$(NOTREADY_DIR)/stopatterm,$(NOTREADY_DIR)/removesockets
.PHONY: e2e-notready
e2e-notready: notready-image ## readiness cases R1-R5 on the non-compliant examples: each fails with its own cause (manifests/examples/notready/expect.txt)
	@$(MAKE) --no-print-directory e2e-driver DRIVER=$(NOTREADY_DRIVERS) DRIVER_IMAGES=$(NOTREADY_IMAGE_TAR) \
	  VERIFY_ARGS='--case R1_mode_manifests --case R2_volumes_across_instances --case R3_own_csi_socket --case R4_serves_after_sigterm --case R5_newer_driver_fails --expect $(CURDIR)/$(NOTREADY_DIR)/expect.txt --remove-left $(VERIFY_ARGS)'

# What `make new-driver` writes, proven as written (kind/driver/new-driver.sh): two projects
# (NEW_DRIVER_MODULE, default example.com/acme-csi, NEW_DRIVER_NAME acme.csi.example.com;
# NEW_DRIVER2_MODULE example.org/beta-storage, NEW_DRIVER2_NAME beta.storage.example.org)
# generated into a temporary directory and copied out of it, built and tested with the
# checkout hidden, imaged, then make e2e-driver on the first's manifests/ (every case,
# R1-R5 named) and both side by side (the local node, under the node lock for that step
# only); the directory is removed at the end. Each step timed.
NEW_DRIVER_MODULE  ?= example.com/acme-csi
NEW_DRIVER_NAME    ?= acme.csi.example.com
NEW_DRIVER2_MODULE ?= example.org/beta-storage
NEW_DRIVER2_NAME   ?= beta.storage.example.org
.PHONY: e2e-new-driver
e2e-new-driver: ## two make new-driver projects end to end: build, test, image, e2e-driver with R1-R5, side by side (local node)
	@GO=$(GO) NEW_DRIVER_MODULE=$(NEW_DRIVER_MODULE) NEW_DRIVER_NAME=$(NEW_DRIVER_NAME) NEW_DRIVER2_MODULE=$(NEW_DRIVER2_MODULE) \
	  NEW_DRIVER2_NAME=$(NEW_DRIVER2_NAME) VERIFY_ARGS='$(VERIFY_ARGS)' bash kind/driver/new-driver.sh
