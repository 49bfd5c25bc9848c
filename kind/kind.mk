# The demo and the end-to-end suite. Included by the top-level Makefile.
.PHONY: demo demo-down

demo: ## build, bring up a node (kind with Docker, else the local node: K8S=1.34…1.37), deploy manifests/, show what the kubelet wrote
	@$(call with_node_lock,bash kind/demo.sh up)

demo-down: ## tear the demo down (no process, mount or socket left)
	@$(call with_node_lock,bash kind/demo.sh down)

# ---------------------------------------------------------------------------
# End-to-end suite (kind/e2e, build tag e2e; see kind/e2e/README.md).
# The local node is one shared resource: every use of it runs under this lock.
# flock -o: the lock is held by flock itself, not inherited by the daemons the
# suite starts (they would otherwise keep it after the suite ends).
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
	@$(call with_node_lock,env E2E_LOCKED=1 E2E_PROVIDER=local E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) $(E2E_RUN))

e2e-kind: e2e-build ## end-to-end suite on kind (Docker): creates kind/cluster.yaml's cluster, deletes it at the end
	E2E_PROVIDER=kind E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) $(E2E_RUN)

# The suite on every Kubernetes version the local node supports, oldest first, under
# one hold of the node's lock; the table goes to bin/e2e/matrix/table.md.
# E2E_VERSIONS="1.34 1.37" limits it; `bash kind/e2e-matrix.sh --table` reprints it.
.PHONY: e2e-matrix
e2e-matrix: ## e2e on Kubernetes 1.34, 1.35, 1.36, 1.37 in turn (local node): a version × case table with the times
	@$(call with_node_lock,bash kind/e2e-matrix.sh $(E2E_VERSIONS))
