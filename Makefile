# csi-registrar — build, test, image, demo. `make help` lists the targets.

SHELL        := /bin/bash
.SHELLFLAGS  := -euo pipefail -c
GO           ?= go
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      := -s -w -X main.version=$(VERSION)
# grpcnotrace drops golang.org/x/net/trace (and html/template) from the binary.
GOBUILD      := CGO_ENABLED=0 $(GO) build -trimpath -tags grpcnotrace -ldflags "$(LDFLAGS)"
IMAGE        ?= csi-registrar:dev
IMAGE_TAR    ?= bin/image.tar
# Where buildah keeps its images when there is no Docker engine.
BUILDAH_ROOT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/csi-registrar/buildah
BUILDAH      ?= buildah --root $(BUILDAH_ROOT)/root --runroot $(BUILDAH_ROOT)/runroot --storage-driver vfs

.PHONY: help build build-all test test-fuzz image clean
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort | column -t -s $$'\t'

build: ## bin/csi-registrar: static, stripped, version from git
	$(GOBUILD) -o bin/csi-registrar ./cmd/csi-registrar

build-all: build ## also cross-compile linux/arm64 (bin/csi-registrar-linux-arm64)
	GOOS=linux GOARCH=arm64 $(GOBUILD) -o bin/csi-registrar-linux-arm64 ./cmd/csi-registrar

test: ## vet, gofmt, unit + integration tests, csi-sanity, fuzz seed corpora
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 ./registrar/...   # the concurrent part: control loop, gRPC and HTTP handlers

test-fuzz: ## run the fuzz targets for a while (FUZZTIME=30s each)
	$(GO) test ./registrar -run '^$$' -fuzz FuzzValidateDriverName -fuzztime $(or $(FUZZTIME),30s)
	$(GO) test ./registrar -run '^$$' -fuzz FuzzRegistrationSocketPath -fuzztime $(or $(FUZZTIME),30s)

# The image root holds the binary and, as a symlink to it, the upstream name,
# so that the exec probe /csi-node-driver-registrar of existing manifests works.
bin/rootfs: build
	rm -rf bin/rootfs && mkdir -p bin/rootfs
	cp bin/csi-registrar bin/rootfs/csi-registrar
	ln -s csi-registrar bin/rootfs/csi-node-driver-registrar

image: bin/rootfs ## container image $(IMAGE) (docker if an engine answers, else buildah) and $(IMAGE_TAR)
	@if docker info >/dev/null 2>&1; then \
	  echo "building $(IMAGE) with docker"; \
	  docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) . ; \
	  docker save -o $(IMAGE_TAR) $(IMAGE); \
	else \
	  command -v buildah >/dev/null || { echo "no Docker engine and no buildah: apt-get install buildah"; exit 1; }; \
	  echo "no Docker engine answers: building $(IMAGE) with buildah"; \
	  mkdir -p $(BUILDAH_ROOT); \
	  $(BUILDAH) build --quiet --isolation chroot --build-arg VERSION=$(VERSION) -t $(IMAGE) . >/dev/null; \
	  rm -f $(IMAGE_TAR); \
	  $(BUILDAH) push --quiet $(IMAGE) docker-archive:$(IMAGE_TAR):$(IMAGE); \
	fi
	@echo "image $(IMAGE): $$(stat -c %s $(IMAGE_TAR)) bytes in $(IMAGE_TAR)"

clean: ## remove bin/
	rm -rf bin

-include kind/localnode/localnode.mk
-include kind/kind.mk
