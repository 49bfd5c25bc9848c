# The demo and the end-to-end suite. Included by the top-level Makefile.
.PHONY: demo demo-down

demo: ## build, bring up a node (kind with Docker, else the local node), deploy manifests/, show what the kubelet wrote
	bash kind/demo.sh up

demo-down: ## tear the demo down (no process, mount or socket left)
	bash kind/demo.sh down

# ---------------------------------------------------------------------------
# End-to-end suite (kind/e2e, build tag e2e; see kind/e2e/README.md).
# The local node is one shared resource: every use of it runs under this lock.
# flock -o: the lock is held by flock itself, not inherited by the daemons the
# suite starts (they would otherwise keep it after the suite ends).
LOCALNODE_LOCK ?= /tmp/csi-registrar-localnode.lock
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
	@command -v flock >/dev/null || { echo "flock (util-linux) is needed"; exit 1; }
	@flock -n $(LOCALNODE_LOCK) true || echo "waiting for $(LOCALNODE_LOCK): another user of the local node holds it"
	flock -o $(LOCALNODE_LOCK) env E2E_LOCKED=1 E2E_PROVIDER=local E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) $(E2E_RUN)

e2e-kind: e2e-build ## end-to-end suite on kind (Docker): creates kind/cluster.yaml's cluster, deletes it at the end
	E2E_PROVIDER=kind E2E_IMAGE_ARCHIVE=$(CURDIR)/$(E2E_IMAGE_TAR) $(E2E_RUN)
