# Shared by demo.sh and e2e: which cluster to use, and how to reach it.
# kind when a Docker engine answers, otherwise the local node (root needed).
# shellcheck shell=bash

KIND_CLUSTER="${KIND_CLUSTER:-csi-registrar}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
T0=${T0:-$(date +%s)}

step() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
die() { echo "error: $*" >&2; exit 1; }

# cluster_kind prints kind or local, or explains what is missing.
cluster_kind() {
  if [[ -n "${CLUSTER:-}" ]]; then echo "$CLUSTER"; return; fi
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo kind; return; fi
  if [[ $(id -u) -eq 0 ]]; then echo local; return; fi
  die "no Docker engine answers (needed for kind) and this is not root (needed for the local node): run as root, or start Docker"
}

kind_bin() {
  [[ -x "$REPO_ROOT/bin/kind" ]] || (cd "$REPO_ROOT" && go build -o bin/kind sigs.k8s.io/kind)
  echo "$REPO_ROOT/bin/kind"
}

# use_cluster exports KUBECONFIG and KUBECTL for the chosen cluster.
use_cluster() {
  case "$1" in
    kind)
      export KUBECONFIG="$REPO_ROOT/bin/kind.kubeconfig"
      "$(kind_bin)" export kubeconfig --name "$KIND_CLUSTER" --kubeconfig "$KUBECONFIG" >/dev/null
      KUBECTL="$(command -v kubectl || true)"
      if [[ -z "$KUBECTL" ]]; then
        bash "$REPO_ROOT/kind/localnode/build.sh" >/dev/null   # builds kubectl among others
        # shellcheck source=localnode/env.sh
        KUBECTL="$(source "$REPO_ROOT/kind/localnode/env.sh" && echo "$KUBECTL")"
      fi
      export KUBECTL ;;
    local)
      # shellcheck source=localnode/env.sh
      source "$REPO_ROOT/kind/localnode/env.sh" ;;
  esac
}
