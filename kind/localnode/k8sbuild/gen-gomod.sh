#!/usr/bin/env bash
# Generate go.mod/go.sum/tools.go of the nested build module for one Kubernetes release,
# in the folder named after its minor version (k8sbuild/1.37/ for v1.37.x).
#   ./gen-gomod.sh v1.37.2
#   ./gen-gomod.sh v1.38.0-alpha.0   a pre-release: folder pre-1.38/, never the default
#                                     nor a supported version (env.sh, e2e-matrix.sh list 1.*/ only)
# k8s.io/kubernetes is not meant to be imported: its go.mod replaces the k8s.io/*
# staging modules with ./staging paths. We mirror those replaces with the published
# v0.X.Y staging modules so the binaries build from the Go module proxy alone.
# Only that folder changes; the project's root go.mod never sees Kubernetes.
# The newest folder is the local node's default version (env.sh); a pre-release's
# folder (pre-<minor>/) is used only when K8S names that pre-release.
set -euo pipefail
cd "$(dirname "$0")"

K8S="${1:?usage: $0 v1.37.x}"
[[ "$K8S" =~ ^v1\.([0-9]+)\.[0-9]+(-(alpha|beta|rc)\.[0-9]+)?$ ]] ||
  { echo "bad version: $K8S (want v1.MINOR.PATCH, or v1.MINOR.PATCH-alpha.N/-beta.N/-rc.N)" >&2; exit 1; }
MINOR="1.${BASH_REMATCH[1]}"
PREV="v0.$((BASH_REMATCH[1] - 1))."
DIR=$MINOR
[[ -z "${BASH_REMATCH[2]}" ]] || DIR="pre-$MINOR"
STAGING="v0.${K8S#v1.}"
MOD="github.com/csi-registrar/csi-registrar/kind/localnode/k8sbuild/$DIR"

# Download outside any module so a half-written go.mod here cannot interfere.
json=$(cd / && { GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S" || true; })
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
if [[ ! -f "$dir/go.mod" ]]; then
  echo "cannot download k8s.io/kubernetes@$K8S:" >&2
  sed -n 's/^[[:space:]]*"Error": //p' <<<"$json" >&2
  exit 1
fi

goline=$(grep -m1 '^go ' "$dir/go.mod")
godebug=$(grep '^godebug ' "$dir/go.mod" || true)

# staging_version MODULE: the version its replace pins, $STAGING. The module proxy does not
# serve every staging module of a pre-release (v1.38.0-alpha.0: cri-streaming, which the
# kubelet imports, and cli-runtime, which kubectl imports, are missing): for a pre-release
# only, such a module falls back to the newest release of the previous minor, the code an
# alpha.0 branched from, with a comment on its line and a warning (one that has no such
# release keeps the pin: go mod tidy fails if anything built here needs it).
staging_version() {
  if [[ "$DIR" == "$MINOR" ]] || (cd / && GOFLAGS=-mod=mod go mod download "$1@$STAGING" 2>/dev/null); then
    echo "$STAGING"
    return
  fi
  local v
  v=$(cd / && GOFLAGS=-mod=mod go list -m -versions "$1" 2>/dev/null | tr ' ' '\n' | grep -F "$PREV" | grep -v -- - | tail -n1)
  # None at all (sample-cli-plugin, sample-controller: nothing built here imports them).
  [[ -n "$v" ]] || { echo "$STAGING"; return; }
  echo "k8sbuild: $1@$STAGING is not served by the module proxy: using $v" >&2
  echo "$v // $STAGING is not served by the module proxy"
}

replaces=""
for m in $(sed -n '/^replace (/,/^)/p' "$dir/go.mod" | awk '$3 ~ /^\.\/staging\// {print $1}'); do
  v=$(staging_version "$m")
  replaces+=$'\t'"$m => $m $v"$'\n'
done

mkdir -p "$DIR"
cd "$DIR"
{
  if [[ "$DIR" == "$MINOR" ]]; then
    echo "// Nested module that builds Kubernetes $MINOR binaries; regenerate with ../gen-gomod.sh."
  else
    echo "// Nested module that builds the Kubernetes pre-release $K8S (not supported, not in CI); regenerate with ../gen-gomod.sh."
  fi
  echo "module $MOD"
  echo
  echo "$goline"
  [[ -n "$godebug" ]] && printf '\n%s\n' "$godebug"
  echo
  echo "require k8s.io/kubernetes $K8S"
  echo
  echo "replace ("
  printf '%s' "$replaces"
  echo ")"
} > go.mod

cat > tools.go <<'EOT'
//go:build tools

// Package k8sbuild only pins the Kubernetes packages this module builds
// (kubeadm and kube-proxy for the kind node image: build.sh --with-kind;
// test/e2e for the storage e2e test binary: kind/storage/build-e2e.sh).
package k8sbuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e"
)
EOT

rm -f go.sum
if ! go mod tidy; then
  # 1.34.x: k8s.io/sample-apiserver v0.34.x, which test/e2e imports, is not on the module proxy.
  echo "k8sbuild: k8s.io/kubernetes/test/e2e of $K8S does not resolve through the module proxy: tools.go pins the commands only (no make e2e-storage on $MINOR)" >&2
  sed -i '\#"k8s.io/kubernetes/test/e2e"#d' tools.go
  go mod tidy
fi
echo "k8sbuild: $DIR/go.mod now requires k8s.io/kubernetes $K8S"
