#!/usr/bin/env bash
# make demo: build, bring up a cluster, load the image, deploy manifests/,
# show what the kubelet wrote.   make demo-down: tear it all down.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
kind=$(cluster_kind)

down() {
  case "$kind" in
    kind) "$(kind_bin)" delete cluster --name "$KIND_CLUSTER" ;;
    local)
      source kind/localnode/env.sh
      if [[ -x "$KUBECTL" ]] && "$KUBECTL" get --raw /readyz >/dev/null 2>&1; then
        step "deleting manifests/"
        "$KUBECTL" delete -k manifests/ --ignore-not-found --wait=true --timeout=120s || true
      fi
      step "stopping the local node"
      bash kind/localnode/down.sh ;;
  esac
  step "demo torn down"
}

up() {
  step "cluster: $kind"
  step "building the binary and the image"
  make --no-print-directory build image
  case "$kind" in
    kind)
      if ! "$(kind_bin)" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
        step "creating kind cluster $KIND_CLUSTER (kind/cluster.yaml); this pulls kindest/node and takes minutes"
        "$(kind_bin)" create cluster --name "$KIND_CLUSTER" --config kind/cluster.yaml
      fi
      use_cluster kind
      step "loading bin/image.tar into every kind node"
      "$(kind_bin)" load image-archive bin/image.tar --name "$KIND_CLUSTER" ;;
    local)
      source kind/localnode/env.sh
      [[ -x "$LOCALNODE_BIN/kubelet" ]] || step "first run: Kubernetes is built from source first; this takes several minutes"
      step "bringing up the local node (kind/localnode)"
      bash kind/localnode/up.sh
      use_cluster local
      step "importing bin/image.tar into the node's containerd"
      bash kind/localnode/load-image.sh bin/image.tar >/dev/null ;;
  esac
  step "applying manifests/"
  "$KUBECTL" apply -k manifests/
  # A new image under the same tag: make the DaemonSet pick it up.
  "$KUBECTL" -n csi-registrar rollout restart daemonset/csi-stub-node >/dev/null
  step "waiting for the DaemonSet"
  "$KUBECTL" -n csi-registrar rollout status daemonset/csi-stub-node --timeout=180s
  step "waiting until the kubelet lists the driver in every CSINode"
  bash kind/show.sh --wait
  cat <<EOT

Inspect:   export KUBECONFIG=$KUBECONFIG
           $KUBECTL get csinode -o yaml
           $KUBECTL -n csi-registrar logs ds/csi-stub-node -c registrar
Tear down: make demo-down
EOT
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) die "usage: $0 [up|down]" ;;
esac
