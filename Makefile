# csi-registrar — build, test, image, demo. `make help` lists the targets.

SHELL        := /bin/bash
.SHELLFLAGS  := -euo pipefail -c
GO           ?= go
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      := -s -w -X main.version=$(VERSION)
# grpcnotrace drops golang.org/x/net/trace (and html/template) from the binary;
# urfave_cli_no_docs drops urfave/cli's man/markdown generator (blackfriday, md2man:
# 262 KB and 0.3 ms of init), urfave_cli_no_suggest its unused "did you mean".
GOBUILD      := CGO_ENABLED=0 $(GO) build -trimpath -tags grpcnotrace,urfave_cli_no_docs,urfave_cli_no_suggest -ldflags "$(LDFLAGS)"
IMAGE        ?= csi-registrar:dev
IMAGE_TAR    ?= bin/image.tar
# Where buildah keeps its images when there is no Docker engine.
BUILDAH_ROOT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/csi-registrar/buildah
BUILDAH      ?= buildah --root $(BUILDAH_ROOT)/root --runroot $(BUILDAH_ROOT)/runroot --storage-driver vfs

.PHONY: help build build-all test test-fuzz test-pluginmanager bench-pluginmanager image clean
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort | column -t -s $$'\t'

build: ## bin/csi-registrar (the image's binary) and bin/kubectl-csi_registrar (the kubectl plugin): static, stripped
	$(GOBUILD) -o bin/csi-registrar ./cmd/csi-registrar
	$(GOBUILD) -o bin/kubectl-csi_registrar ./cmd/kubectl-csi_registrar

build-all: build ## also cross-compile linux/arm64 (bin/csi-registrar-linux-arm64)
	GOOS=linux GOARCH=arm64 $(GOBUILD) -o bin/csi-registrar-linux-arm64 ./cmd/csi-registrar

# The packages with files built only under the e2e or bench tag.
TAGGED_PKGS := ./cmd/csi-registrar ./kind/e2e/... ./kind/storage/...
test: ## vet, gofmt, staticcheck, unit + integration tests, csi-sanity, fuzz seed corpora
	$(GO) vet ./...
	$(GO) tool staticcheck ./...   # honnef.co/go/tools, pinned in go.mod's tool block
	@# The e2e suites and the benchmarks build only under their tags: check them too.
	$(GO) vet -tags e2e $(TAGGED_PKGS) && $(GO) vet -tags bench $(TAGGED_PKGS)
	$(GO) tool staticcheck -tags e2e $(TAGGED_PKGS) && $(GO) tool staticcheck -tags bench $(TAGGED_PKGS)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) test -race -count=1 ./...   # every package: the control loop, gRPC and HTTP handlers, the processes

# The nested module kind/pluginmanager: the kubelet's own plugin manager and CSI
# registration handler (k8s.io/kubernetes) in-process against registrars in the
# rolling-update mode, in orders a real kubelet cannot be made to take, once per
# supported minor's kubelet code (go.mod: the newest; k8s-<minor>.mod: the others;
# K8S_MINORS="1.36 1.37" picks; 1.38: the pre-release v1.38.0-beta.0's code, built with the
# go1.27.4 toolchain its k8s-1.38.mod names). Its own module, outside `make test`'s race build.
K8S_MINORS ?= 1.34 1.35 1.36 1.37 1.38
test-pluginmanager: ## the handover against each supported kubelet's plugin manager and CSI handler, in-process (the minors side by side: ~5 min warm)
	GO=$(GO) K8S_MINORS="$(K8S_MINORS)" PM_TAGS="$(PM_TAGS)" PM_RUN="$(PM_RUN)" bash kind/pluginmanager/minors.sh

bench-pluginmanager: ## what registrations the kubelet keeps cost its plugin manager's reconciler, per round, at 1 to 1000 entries (go.mod's kubelet code)
	cd kind/pluginmanager && $(GO) test -run '^$$' -bench BenchmarkReconcile -benchtime $(or $(BENCHTIME),3s) -count $(or $(COUNT),3) .

test-fuzz: ## run the fuzz targets for a while (FUZZTIME=30s each)
	$(GO) test ./registrar/csiplugin -run '^$$' -fuzz FuzzValidateDriverName -fuzztime $(or $(FUZZTIME),30s)
	$(GO) test ./registrar/csiplugin -run '^$$' -fuzz FuzzRegistrationSocketPath -fuzztime $(or $(FUZZTIME),30s)

# The image root holds the binary and, as a symlink to it, the upstream name,
# so that the exec probe /csi-node-driver-registrar of existing manifests works.
bin/rootfs: build
	rm -rf bin/rootfs && mkdir -p bin/rootfs
	cp bin/csi-registrar bin/rootfs/csi-registrar
	ln -s csi-registrar bin/rootfs/csi-node-driver-registrar

image: bin/rootfs ## container image $(IMAGE) (docker if an engine answers, else buildah) and $(IMAGE_TAR)
	@IMAGE=$(IMAGE) IMAGE_TAR=$(IMAGE_TAR) VERSION='$(VERSION)' BUILDAH="$(BUILDAH)" BUILDAH_ROOT=$(BUILDAH_ROOT) bash kind/images/image.sh

# The workload of manifests/examples/: a static program FROM scratch, built
# and saved like $(IMAGE) (docker if an engine answers, else $(BUILDAH)).
EXAMPLE_IMAGE     ?= csi-registrar-example:dev
EXAMPLE_IMAGE_TAR ?= bin/example-image.tar
.PHONY: example-image
example-image: ## example workload image $(EXAMPLE_IMAGE) (manifests/examples/) and $(EXAMPLE_IMAGE_TAR)
	rm -rf bin/example-rootfs && mkdir -p bin/example-rootfs $(BUILDAH_ROOT)
	@docker info >/dev/null 2>&1 || command -v buildah >/dev/null || bash kind/localnode/install-deps.sh buildah
	$(GOBUILD) -o bin/example-rootfs/writer ./manifests/examples/writer
	BUILDAH="$(BUILDAH)" bash manifests/examples/writer/build-image.sh $(EXAMPLE_IMAGE) $(EXAMPLE_IMAGE_TAR) bin/example-rootfs
# The non-compliant example drivers of manifests/examples/notready/ (one fault each).
NOTREADY_IMAGE     ?= csi-registrar-notready:dev
NOTREADY_IMAGE_TAR ?= bin/notready-image.tar
.PHONY: notready-image
notready-image: ## non-compliant example drivers' image $(NOTREADY_IMAGE) (manifests/examples/notready/) and $(NOTREADY_IMAGE_TAR)
	@mkdir -p bin $(BUILDAH_ROOT)
	GO=$(GO) BUILDAH="$(BUILDAH)" bash manifests/examples/notready/build-image.sh $(NOTREADY_IMAGE) $(NOTREADY_IMAGE_TAR)
# The e2e suite's template cases (kind/e2e/template_test.go) run the example pod.
e2e e2e-kind: example-image

# A new driver project from the reference driver (docs/writing-a-driver.md,
# "A new driver project in one command"); its go.mod replaces csi-registrar
# with this checkout until a release is tagged.
.PHONY: new-driver
new-driver: ## MODULE=example.com/mydriver DRIVER=my.csi.example.com DIR=../mydriver: a standalone driver project (PACKAGE=, KUBELET_DIR= optional)
	@[ -n "$(MODULE)" ] && [ -n "$(DRIVER)" ] && [ -n "$(DIR)" ] || { \
	  echo "make new-driver: give MODULE=<Go module path> DRIVER=<CSI driver name> DIR=<new or empty directory>, e.g. make new-driver MODULE=example.com/mydriver DRIVER=my.csi.example.com DIR=../mydriver" >&2; exit 2; }
	$(GO) run ./cmd/csi-driver-new -from $(CURDIR) -module '$(MODULE)' -driver '$(DRIVER)' -dir '$(DIR)' \
	  $(if $(PACKAGE),-package '$(PACKAGE)') $(if $(KUBELET_DIR),-kubelet-dir '$(KUBELET_DIR)')

clean: ## remove bin/
	rm -rf bin

# ---- bench: the figures of docs/performance.md -------------------------------
# One table: figure, runs, min / median / max, goal, verdict and, with
# UPSTREAM_REGISTRAR=/path/to/csi-node-driver-registrar, upstream measured in the
# same run (alternating) and the ratio ours/upstream; also $(BENCH_DIR)/results.md.
# kind/bench/bench.sh runs it: figures 7–8 use the local node (root), and the whole run
# then holds the node's lock; BENCH_KUBELET=0 skips them (and the lock).
# BENCH_RUNS (10), BENCH_IDLE (60s), BENCH_INSTANCES (10) are passed on.
BENCH_DIR      ?= bin/bench
BENCH_KUBELET  ?= 1

.PHONY: bench
bench: build ## performance figures 1–9 as one table (UPSTREAM_REGISTRAR=... adds upstream's column; ~15 min)
	@BENCH_DIR=$(BENCH_DIR) BENCH_KUBELET=$(BENCH_KUBELET) IMAGE_TAR=$(IMAGE_TAR) GO=$(GO) bash kind/bench/bench.sh

# Rollouts side by side (verify's case 6 on the mode's and the plain manifests, with
# UPSTREAM_REGISTRAR=<image archive of node-driver-registrar> beside), then ten rollouts
# with faults (case 8); kind/bench/rollout.sh. Each step takes the node lock itself.
.PHONY: bench-rollout
bench-rollout: ## rollout figures: unregistered time and failed mounts, mode vs none vs upstream (UPSTREAM_REGISTRAR=archive), then 10 rollouts with faults (~15 min)
	@bash kind/bench/rollout.sh

# Figure 10 on every supported Kubernetes version (E2E_VERSIONS="1.35 1.37" limits
# it): a rejected registration and its repair with the real kubelet; ~3 min a version.
.PHONY: bench-retry
bench-retry: build ## figure 10: rejection and repair with the real kubelet, per Kubernetes version (local node)
	@$(call with_node_lock,bash kind/bench/retry.sh $(E2E_VERSIONS))

# Not part of `make bench`: kubectl csi-registrar status against STATUS_NODES
# (5000) nodes simulated by kwok on the local node's API server; ~20-40 min on
# 2 cores, holding the node's lock. Everything it creates is removed.
STATUS_NODES ?= 5000
.PHONY: bench-status-scale
bench-status-scale: build ## kubectl csi-registrar status on STATUS_NODES (5000) kwok nodes: wall time, API requests, peak RSS
	@$(call with_node_lock,bash kind/bench/statusscale.sh -nodes=$(STATUS_NODES))

# ---- release: the artifacts of one version (docs/development.md "Releases") ---
# $(RELEASE_DIR): static binaries for linux amd64, arm (GOARM=7), arm64, ppc64le
# and s390x (internal/release Platforms; the image's and the kubectl plugin's,
# built as by `make build`), one multi-platform OCI image (an image index of the
# five) as an OCI archive and its digest, a CycloneDX SBOM of the linked Go
# modules, the kubectl plugin's .tar.gz archives and their krew manifest, and
# SHA256SUMS; built and written by internal/release/assemble (Go: no container
# tool needed), then checked by the release checker (internal/release,
# TestReleaseDir). Only files named as a release names them are removed from
# $(RELEASE_DIR). VERSION must be given (git describe's default is refused).
RELEASE_DIR    ?= bin/release
# Where the release's files will be downloaded from (the krew manifest's URIs);
# empty: the GitHub release of $(VERSION).
RELEASE_DOWNLOAD_URL ?=
# The SBOM's build tags: those of GOBUILD (the checker compares them with the binaries').
RELEASE_TAGS   := grpcnotrace,urfave_cli_no_docs,urfave_cli_no_suggest

.PHONY: release
release: ## VERSION=vX.Y.Z: binaries (linux amd64, arm/v7, arm64, ppc64le, s390x), one multi-platform OCI archive, SBOM, krew manifest, SHA256SUMS in $(RELEASE_DIR), checked
	$(GO) run ./internal/release/assemble -build -go $(GO) -dir $(RELEASE_DIR) \
	  -version '$(if $(filter file,$(origin VERSION)),,$(VERSION))' -tags $(RELEASE_TAGS) -ldflags '$(LDFLAGS)' \
	  -created $$(git log -1 --format=%ct 2>/dev/null || date +%s) -revision "$$(git rev-parse HEAD 2>/dev/null || true)" \
	  -download-url "$(RELEASE_DOWNLOAD_URL)"
	RELEASE_CHECK_DIR=$(abspath $(RELEASE_DIR)) RELEASE_CHECK_VERSION=$(VERSION) \
	  $(GO) test -count=1 -run '^TestReleaseDir$$' ./internal/release

# ---- test-platforms: the release's other platforms under user-mode emulation ---
# kind/platforms/test-platforms.sh: per platform (linux arm/v7, arm64, ppc64le, s390x on an
# amd64 machine; PLATFORMS="arm" narrows), csi-registrar --version and the test
# binaries of the registration server, socket ownership and the control loop under
# qemu-<arch> (Debian's qemu-user, installed if missing; no binfmt registration),
# each test binary printing its GOARCH. Binaries and logs in bin/platforms/.
.PHONY: test-platforms
test-platforms: ## csi-registrar --version and the registrar's test packages for linux arm/v7, arm64, ppc64le, s390x under qemu-user (installs it), each printing its GOARCH
	GO=$(GO) VERSION=$(VERSION) TAGS=$(RELEASE_TAGS) LDFLAGS='$(LDFLAGS)' PLATFORMS="$(PLATFORMS)" bash kind/platforms/test-platforms.sh

# .ci/run runs the gate and one slice of the long form; this runs the long form alone (docs/development.md
# "The gate and the slices"), and records each slice that passed in .ci/slices.tsv (commit it).
.PHONY: ci-full
ci-full: ## the long form of CI without the gate: every slice of .ci/run (SLICE=N: one), each ~10 min warm; records the green ones in .ci/slices.tsv
	CI_GATE=0 CI_SLICE=$(or $(SLICE),all) bash .ci/run

-include kind/localnode/localnode.mk
-include kind/kind.mk
-include kind/storage/storage.mk
