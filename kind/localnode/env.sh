#!/usr/bin/env bash
# Single source of truth for the local node's paths.
#   source kind/localnode/env.sh      # sets and exports the variables below
#   kind/localnode/env.sh             # prints them as export lines: eval "$(kind/localnode/env.sh)"
#
# Everything (binaries, certs, kubeconfigs, state, logs, pid files) lives outside the
# clone, keyed by the Kubernetes version pinned in k8sbuild/go.mod, so a fresh clone
# reuses a warm build and can stop a node that an earlier clone started.
# Sourced into an interactive shell, so no `set -e` here unless run directly.

LOCALNODE_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# LOCALNODE_K8S_VERSION overrides the pinned version (down.sh uses it to stop a node
# that was started from a clone pinned to another version).
K8S_VERSION="${LOCALNODE_K8S_VERSION:-$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$LOCALNODE_SRC/k8sbuild/go.mod")}"
LOCALNODE_ROOT="${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}/csi-registrar/localnode"
LOCALNODE_CACHE="$LOCALNODE_ROOT/$K8S_VERSION"
LOCALNODE_BIN="$LOCALNODE_CACHE/bin"
# Host-wide runtime dir (tmpfs): containerd socket, state and runc root. Only one
# local node can run at a time anyway (fixed ports, /var/lib/kubelet).
LOCALNODE_RUNTIME=/run/csi-registrar-localnode
KUBECONFIG="$LOCALNODE_CACHE/pki/admin.kubeconfig"
KUBECTL="$LOCALNODE_BIN/kubectl"
# kubectl's discovery/http cache, kept out of ~/.kube.
KUBECACHEDIR="$LOCALNODE_CACHE/kube-cache"
# The kubelet's default node name: the hostname, lowercased. up.sh records it.
if [[ -s "$LOCALNODE_CACHE/node-name" ]]; then
  NODE_NAME="$(<"$LOCALNODE_CACHE/node-name")"
else
  NODE_NAME="$(hostname | tr '[:upper:]' '[:lower:]')"
fi
# Picked up by ctr, so `ctr images ls` talks to the node's containerd.
CONTAINERD_ADDRESS="$LOCALNODE_RUNTIME/containerd/containerd.sock"
CONTAINERD_NAMESPACE=k8s.io
export LOCALNODE_SRC K8S_VERSION LOCALNODE_ROOT LOCALNODE_CACHE LOCALNODE_BIN LOCALNODE_RUNTIME \
  KUBECONFIG KUBECTL KUBECACHEDIR NODE_NAME CONTAINERD_ADDRESS CONTAINERD_NAMESPACE

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  for v in K8S_VERSION LOCALNODE_CACHE KUBECONFIG KUBECTL KUBECACHEDIR NODE_NAME CONTAINERD_ADDRESS CONTAINERD_NAMESPACE; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
fi
