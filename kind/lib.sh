# Shared by demo/demo.sh and cluster/ (cluster.sh, dockerd/, nodeimage/): which cluster to use,
# and how to reach it. kind when a Docker engine answers (or KIND=1: then a
# private dockerd is started when none answers), otherwise the local node (root).
# shellcheck shell=bash

KIND_CLUSTER="${KIND_CLUSTER:-csi-registrar}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Everything kind-related outside the clone: the private dockerd's data root (so
# built node images survive), node images' build cache per Kubernetes version.
KIND_CACHE="${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}/csi-registrar/kind"
T0=${T0:-$(date +%s)}
export T0

step() { echo "[$(($(date +%s) - T0))s] $*"; }
die() { echo "error: $*" >&2; exit 1; }

# install_debs PKG...: install the Debian packages that are missing (kind/localnode/install-deps.sh).
install_debs() { bash "$REPO_ROOT/kind/localnode/install-deps.sh" "$@" >&2; }

docker_cli() { docker "$@"; }

# user_docker_answers: a Docker engine other than our private one answers on the
# caller's DOCKER_HOST (or the default socket).
user_docker_answers() {
  [[ "${DOCKER_HOST:-}" != "unix:///run/csi-registrar-kind/docker.sock" ]] || return 1
  command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1
}

# cluster_kind prints kind or local, or explains what is missing. CLUSTER=kind|local
# decides; KIND=1 is CLUSTER=kind (a private dockerd is started if no engine answers).
cluster_kind() {
  if [[ -n "${CLUSTER:-}" ]]; then echo "$CLUSTER"; return; fi
  if [[ "${KIND:-}" == 1 ]]; then echo kind; return; fi
  if user_docker_answers; then echo kind; return; fi
  if [[ $(id -u) -eq 0 ]]; then echo local; return; fi
  die "no Docker engine answers (needed for kind) and this is not root (needed for the local node): run as root, or start Docker, or KIND=1 as root (private dockerd)"
}

# use_engine: export DOCKER_HOST for kind: the caller's engine when it answers,
# else our private dockerd, started now (kind/cluster/dockerd/dockerd.sh).
use_engine() {
  if user_docker_answers; then return; fi
  bash "$REPO_ROOT/kind/cluster/dockerd/dockerd.sh" start
  eval "$(bash "$REPO_ROOT/kind/cluster/dockerd/dockerd.sh" env)"
}

# kind_bin: bin/kind at go.mod's version of sigs.k8s.io/kind (built again when it differs).
kind_bin() {
  local want
  want=$(cd "$REPO_ROOT" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
  if [[ "$("$REPO_ROOT/bin/kind" version 2>/dev/null | awk '{print $2}')" != "$want" ]]; then
    (cd "$REPO_ROOT" && go build -o bin/kind sigs.k8s.io/kind) >&2
  fi
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
