# The demo and the end-to-end suite. Included by the top-level Makefile.
.PHONY: demo demo-down

demo: ## build, bring up a node (kind with Docker, else the local node), deploy manifests/, show what the kubelet wrote
	bash kind/demo.sh up

demo-down: ## tear the demo down (no process, mount or socket left)
	bash kind/demo.sh down
