# Real single-node Kubernetes on this machine, without Docker (see kind/localnode/README.md).
# Included by the top-level Makefile; paths are relative to the repository root.
LOCALNODE := kind/localnode
# The local node is one shared resource: every use of it (up, down, demo, e2e, bench)
# holds its lock. with_node_lock CMD: run CMD (a simple command) under it, unless the
# caller already holds it (LOCALNODE_LOCKED=1); kind/nodelock.sh is the one implementation
# (the e2e suite uses it too).
LOCALNODE_LOCK ?= /tmp/csi-registrar-localnode.lock
with_node_lock = LOCALNODE_LOCK=$(LOCALNODE_LOCK) bash kind/nodelock.sh $(1)

.PHONY: local-deps local-build local-up local-down local-purge local-smoke

local-deps: ## Debian packages for the local node (apt only when something is missing)
	bash $(LOCALNODE)/install-deps.sh

local-build: local-deps ## Build kube-apiserver/-controller-manager/-scheduler, kubelet, kubectl (cached)
	bash $(LOCALNODE)/build.sh

local-up: ## Start the local node (K8S=1.34…1.37, newest by default; cold: builds first, minutes)
	@$(call with_node_lock,bash $(LOCALNODE)/up.sh)

local-down: ## Stop the local node, whatever its version, and undo its host changes (cluster state kept)
	@$(call with_node_lock,bash $(LOCALNODE)/down.sh)

local-purge: ## Stop the local node and wipe its state (built binaries kept)
	@$(call with_node_lock,bash $(LOCALNODE)/down.sh --purge)

local-smoke: ## DaemonSet + namespace deletion check against the running local node
	@$(call with_node_lock,bash $(LOCALNODE)/smoke.sh)
