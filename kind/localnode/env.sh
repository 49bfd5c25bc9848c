#!/usr/bin/env bash
# Single source of truth for the local node's paths.
#   source kind/localnode/env.sh      # sets and exports the variables below
#   kind/localnode/env.sh             # prints them as export lines: eval "$(kind/localnode/env.sh)"
#
# Everything (binaries, certs, kubeconfigs, state, logs, pid files) lives outside the
# clone, keyed by the Kubernetes version (k8sbuild/<minor>/go.mod), so a fresh clone
# reuses a warm build and can stop a node that an earlier clone started.
# Sourced into an interactive shell, so no `set -e` here unless run directly.

LOCALNODE_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The Kubernetes version: K8S=1.37 (or K8S_VERSION=1.37 / v1.37.2) picks the nested build
# module k8sbuild/1.37/, which pins the release's latest patch; unset, the newest folder.
# LOCALNODE_K8S_VERSION (a full version) overrides both: down.sh uses it to stop a node
# that was started with another version.
# A pre-release is used only when named in full (K8S=1.38.0-beta.0): its folder
# k8sbuild/pre-<version>/ (pre-1.38.0-alpha.0/, pre-1.38.0-beta.0/ side by side) is never
# the default, nor one of the minors listed as supported.
k8s_minor_dirs() { (cd "$LOCALNODE_SRC/k8sbuild" && ls -d 1.*/ 2>/dev/null | tr -d / | sort -V); }
# gomod_required GO.MOD MODULE: the version GO.MOD requires of MODULE, on a `require` line
# of its own or in a `require (...)` block.
gomod_required() {
  awk -v m="$2" '$1 == "require" && $2 == m {print $3; exit} $1 == m && $2 ~ /^v/ {print $2; exit}' "$1"
}
k8s_pinned() { gomod_required "$LOCALNODE_SRC/k8sbuild/$1/go.mod" k8s.io/kubernetes; }
# k8s_pre_pinned MINOR: the pre-releases of MINOR pinned in k8sbuild/pre-<version>/.
k8s_pre_pinned() { (cd "$LOCALNODE_SRC/k8sbuild" && ls -d "pre-$1".*/ 2>/dev/null | sed 's#^pre-##; s#/$##' | sort -V | paste -sd ' '); }
# K8S_PATCH=NAME: the kubelet built from the pinned k8s.io/kubernetes with the project's
# own patch patches/NAME-<minor>.patch applied to a copy of its source (build-patched.sh);
# the node's state and binaries then live apart from the stock build's (LOCALNODE_KEY).
K8S_PATCH=${K8S_PATCH:-}
if [[ -n "${LOCALNODE_K8S_VERSION:-}" ]]; then
  # A state directory's name: VERSION, or VERSION+PATCH for a patched kubelet.
  K8S_VERSION=${LOCALNODE_K8S_VERSION%%+*}
  K8S_PATCH=
  [[ "$LOCALNODE_K8S_VERSION" != *+* ]] || K8S_PATCH=${LOCALNODE_K8S_VERSION#*+}
else
  _k8s_want=${K8S:-${K8S_VERSION:-}}
  _k8s_want=${_k8s_want#v}
  _k8s_dir=
  if [[ -z "$_k8s_want" ]]; then
    K8S_MINOR=$(k8s_minor_dirs | tail -n1)
  elif [[ "$_k8s_want" =~ ^(1\.[0-9]+)(\.[0-9]+)?$ ]]; then
    K8S_MINOR=${BASH_REMATCH[1]}
  elif [[ "$_k8s_want" =~ ^(1\.[0-9]+)\.[0-9]+-(alpha|beta|rc)\.[0-9]+$ ]]; then
    K8S_MINOR=${BASH_REMATCH[1]}
    _k8s_dir=pre-$_k8s_want
    if [[ ! -f "$LOCALNODE_SRC/k8sbuild/$_k8s_dir/go.mod" || "$(k8s_pinned "$_k8s_dir")" != "v$_k8s_want" ]]; then
      echo "K8S=$_k8s_want: this pre-release is not pinned in k8sbuild/$_k8s_dir/ (pinned pre-releases of $K8S_MINOR: $(k8s_pre_pinned "$K8S_MINOR" | grep . || echo none); add it with kind/localnode/k8sbuild/gen-gomod.sh v$_k8s_want)" >&2
      return 2 2>/dev/null || exit 2
    fi
  else
    echo "K8S=$_k8s_want: not a Kubernetes version; use the minor release, e.g. K8S=1.37 (supported: $(k8s_minor_dirs | tr '\n' ' '))" >&2
    return 2 2>/dev/null || exit 2
  fi
  _k8s_dir=${_k8s_dir:-$K8S_MINOR}
  if [[ ! -f "$LOCALNODE_SRC/k8sbuild/$_k8s_dir/go.mod" ]]; then
    echo "K8S=$_k8s_want: Kubernetes $K8S_MINOR is not supported by the local node (supported: $(k8s_minor_dirs | tr '\n' ' ')); add it with kind/localnode/k8sbuild/gen-gomod.sh v$K8S_MINOR.N" >&2
    [[ -z "$(k8s_pre_pinned "$K8S_MINOR")" ]] ||
      echo "  (pre-releases are pinned, named in full: K8S=$(k8s_pre_pinned "$K8S_MINOR" | sed 's/ / or K8S=/g'))" >&2
    return 2 2>/dev/null || exit 2
  fi
  K8S_VERSION=$(k8s_pinned "$_k8s_dir")
  if [[ "$_k8s_want" =~ ^1\.[0-9]+\.[0-9]+$ && "v$_k8s_want" != "$K8S_VERSION" ]]; then
    echo "K8S_VERSION=v$_k8s_want: the local node builds $K8S_VERSION for Kubernetes $K8S_MINOR (the patch pinned in k8sbuild/$K8S_MINOR/go.mod)" >&2
  fi
  unset _k8s_want _k8s_dir
fi
K8S_MINOR=$(sed -E 's/^v(1\.[0-9]+)\..*/\1/' <<<"$K8S_VERSION")
K8SBUILD_DIR="$LOCALNODE_SRC/k8sbuild/$K8S_MINOR"
# A pre-release (v1.38.0-beta.0) builds from k8sbuild/pre-1.38.0-beta.0/.
[[ "$K8S_VERSION" != *-* ]] || K8SBUILD_DIR="$LOCALNODE_SRC/k8sbuild/pre-${K8S_VERSION#v}"
# The Go toolchain of the go commands run in K8SBUILD_DIR (lib.sh's k8s_go): its go.mod's
# `toolchain` line when it has one (v1.38.0-beta.0 wants go 1.27.0; the machine's Go is
# older, and the module proxy serves go1.27.4), else the go command's own.
K8S_GOTOOLCHAIN=$(awk '$1 == "toolchain" {print $2; exit}' "$K8SBUILD_DIR/go.mod" 2>/dev/null)
K8S_PATCH_FILE=
if [[ -n "$K8S_PATCH" ]]; then
  K8S_PATCH_FILE="$LOCALNODE_SRC/patches/$K8S_PATCH-$K8S_MINOR.patch"
  if [[ ! "$K8S_PATCH" =~ ^[a-z0-9][a-z0-9-]*$ || ! -f "$K8S_PATCH_FILE" ]]; then
    echo "K8S_PATCH=$K8S_PATCH: no patch kind/localnode/patches/$K8S_PATCH-$K8S_MINOR.patch for Kubernetes $K8S_MINOR (a patch is named NAME-<minor>.patch, NAME in a-z, 0-9, -; there: $(cd "$LOCALNODE_SRC/patches" 2>/dev/null && ls -- *.patch 2>/dev/null | tr '\n' ' '); unset K8S_PATCH for the stock kubelet)" >&2
    return 2 2>/dev/null || exit 2
  fi
fi
# What the node's state is keyed by, and the patched kubelet's version (v1.37.2+NAME).
LOCALNODE_KEY="$K8S_VERSION${K8S_PATCH:++$K8S_PATCH}"
LOCALNODE_ROOT="${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}/csi-registrar/localnode"
LOCALNODE_CACHE="$LOCALNODE_ROOT/$LOCALNODE_KEY"
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
export LOCALNODE_SRC K8S_VERSION K8S_MINOR K8S_GOTOOLCHAIN K8S_PATCH K8S_PATCH_FILE LOCALNODE_KEY K8SBUILD_DIR LOCALNODE_ROOT LOCALNODE_CACHE LOCALNODE_BIN LOCALNODE_RUNTIME \
  KUBECONFIG KUBECTL KUBECACHEDIR NODE_NAME CONTAINERD_ADDRESS CONTAINERD_NAMESPACE

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  for v in K8S_VERSION K8S_PATCH LOCALNODE_CACHE KUBECONFIG KUBECTL KUBECACHEDIR NODE_NAME CONTAINERD_ADDRESS CONTAINERD_NAMESPACE; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
fi
