#!/usr/bin/env bash
# Generate go.mod/go.sum/tools.go of the nested build module for one Kubernetes release,
# in the folder named after its minor version (k8sbuild/1.37/ for v1.37.x).
#   ./gen-gomod.sh v1.37.2
# k8s.io/kubernetes is not meant to be imported: its go.mod replaces the k8s.io/*
# staging modules with ./staging paths. We mirror those replaces with the published
# v0.X.Y staging modules so the binaries build from the Go module proxy alone.
# Only that folder changes; the project's root go.mod never sees Kubernetes.
# The newest folder is the local node's default version (env.sh).
set -euo pipefail
cd "$(dirname "$0")"

K8S="${1:?usage: $0 v1.37.x}"
[[ "$K8S" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "bad version: $K8S (want v1.MINOR.PATCH)" >&2; exit 1; }
MINOR="1.${BASH_REMATCH[1]}"
STAGING="v0.${K8S#v1.}"
MOD="github.com/csi-registrar/csi-registrar/kind/localnode/k8sbuild/$MINOR"

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

mkdir -p "$MINOR"
cd "$MINOR"
{
  echo "// Nested module that builds Kubernetes $MINOR binaries; regenerate with ../gen-gomod.sh."
  echo "module $MOD"
  echo
  echo "$goline"
  [[ -n "$godebug" ]] && printf '\n%s\n' "$godebug"
  echo
  echo "require k8s.io/kubernetes $K8S"
  echo
  echo "replace ("
  sed -n '/^replace (/,/^)/p' "$dir/go.mod" | awk -v v="$STAGING" '$3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " " v}'
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
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
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
echo "k8sbuild: $MINOR/go.mod now requires k8s.io/kubernetes $K8S"
