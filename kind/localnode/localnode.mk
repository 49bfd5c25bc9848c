# Real single-node Kubernetes on this machine, without Docker (see kind/localnode/README.md).
# Included by the top-level Makefile; paths are relative to the repository root.
LOCALNODE := kind/localnode

.PHONY: local-deps local-build local-up local-down local-purge local-smoke

local-deps: ## Debian packages for the local node (apt only when something is missing)
	bash $(LOCALNODE)/install-deps.sh

local-build: local-deps ## Build kube-apiserver/-controller-manager/-scheduler, kubelet, kubectl (cached)
	bash $(LOCALNODE)/build.sh

local-up: ## Start the local node (cold: builds first, minutes); prints export KUBECONFIG=...
	bash $(LOCALNODE)/up.sh

local-down: ## Stop the local node and undo its host changes (cluster state kept)
	bash $(LOCALNODE)/down.sh

local-purge: ## Stop the local node and wipe its state (built binaries kept)
	bash $(LOCALNODE)/down.sh --purge

local-smoke: ## DaemonSet + namespace deletion check against the running local node
	bash $(LOCALNODE)/smoke.sh
