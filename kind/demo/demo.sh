#!/usr/bin/env bash
# make demo: build, bring up a cluster, load the image, deploy manifests/,
# show what the kubelet wrote.   make demo-down: tear it all down.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
# What `up` brought up, for `down` (with KIND=1 and a private dockerd, no engine
# answers any more at `make demo-down` time, so it cannot be guessed again).
DEMO_STATE="$REPO_ROOT/bin/demo.cluster"
if [[ "${1:-up}" == down && -s "$DEMO_STATE" && -z "${CLUSTER:-}" ]]; then
  kind=$(<"$DEMO_STATE")
else
  kind=$(cluster_kind)
fi

down() {
  case "$kind" in
    kind) bash kind/cluster/cluster.sh down ;;
    local)
      source kind/localnode/env.sh
      if [[ -x "$KUBECTL" ]] && "$KUBECTL" get --raw /readyz >/dev/null 2>&1; then
        step "deleting manifests/"
        "$KUBECTL" delete -k manifests/ --ignore-not-found --wait=true --timeout=120s || true
      fi
      step "stopping the local node"
      bash kind/localnode/down.sh ;;
  esac
  rm -f "$DEMO_STATE"
  step "demo torn down"
}

up() {
  step "cluster: $kind"
  mkdir -p bin && echo "$kind" >"$DEMO_STATE"
  step "building the binary and the image"
  make --no-print-directory build image
  case "$kind" in
    kind)
      bash kind/cluster/cluster.sh up
      eval "$(bash kind/cluster/cluster.sh env)"
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
  bash kind/demo/show.sh --wait
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
