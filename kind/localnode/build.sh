#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl
# from k8s.io/kubernetes through the Go module proxy (nested module k8sbuild/<minor>/),
# into the version-keyed cache dir. Skips when the binaries are already current.
#   build.sh [--force] [--with-kind]
# --with-kind also builds kubeadm and kube-proxy (the kind node image, kind/nodeimage/),
# in the same go build, cache dir and stamp: the five shared ones come from the build cache.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

force=0
bins=("${K8S_BINS[@]}")
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --with-kind) bins+=("${K8S_KIND_BINS[@]}") ;;
    *) echo "build.sh: unknown argument $arg (use --force, --with-kind)" >&2; exit 2 ;;
  esac
done

# One build per version at a time: a second caller waits, then finds it current.
build_lock build

# The kind binaries that are there are rebuilt too: one stamp for the whole directory.
for b in "${K8S_KIND_BINS[@]}"; do
  [[ -x "$LOCALNODE_BIN/$b" && " ${bins[*]} " != *" $b "* ]] && bins+=("$b")
done
if [[ $force == 0 ]] && build_is_current "${bins[@]}"; then
  echo "build: Kubernetes $K8S_VERSION binaries are current in $LOCALNODE_BIN (${bins[*]})"
  exit 0
fi
command -v go >/dev/null || die "go is not installed"

cd "$K8SBUILD_DIR"
ldflags=$(k8s_ldflags)

pkgs=()
for b in "${bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
tmp="$LOCALNODE_CACHE/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp" "$LOCALNODE_BIN"
echo "build: go build ${bins[*]} ($K8S_VERSION, GOCACHE=$(go env GOCACHE), GOMODCACHE=$(go env GOMODCACHE))"
still_compiling build
# One go build for all of them: shared packages compile once, both cores stay busy.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$LOCALNODE_BIN/$b"; done
rmdir "$tmp"
build_stamp >"$LOCALNODE_BIN/.stamp"
"$LOCALNODE_BIN/kubelet" --version
echo "build: done in $(elapsed)s -> $LOCALNODE_BIN"
