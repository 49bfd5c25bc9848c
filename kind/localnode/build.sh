#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl
# from k8s.io/kubernetes, and etcd at the version that release pins (go.etcd.io/etcd/server/v3),
# through the Go module proxy (nested module k8sbuild/<minor>/), into the version-keyed
# cache dir. Skips when the binaries are already current.
#   build.sh [--force] [--with-kind]
# With K8S_PATCH=NAME set, build-patched.sh instead (a kubelet with our patch).
# --with-kind also builds kubeadm and kube-proxy (the kind node image, kind/cluster/nodeimage/),
# in the same go build, cache dir and stamp: the five shared ones come from the build cache.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

# K8S_PATCH=NAME: the stock build, then the kubelet with patches/NAME-<minor>.patch.
[[ -z "$K8S_PATCH" ]] || exec bash "$here/build-patched.sh" "$@"

force=0
bins=("${NODE_BINS[@]}")
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
  echo "build: Kubernetes $K8S_VERSION binaries and etcd $(etcd_pinned) are current in $LOCALNODE_BIN (${bins[*]})"
  exit 0
fi
command -v go >/dev/null || die "go is not installed"

cd "$K8SBUILD_DIR"
ldflags=$(k8s_ldflags)

[[ -n "$(etcd_pinned)" ]] || die "$K8SBUILD_DIR/go.mod does not require $ETCD_PKG: regenerate it with kind/localnode/k8sbuild/gen-gomod.sh $K8S_VERSION"
pkgs=()
for b in "${bins[@]}"; do
  if [[ $b == etcd ]]; then pkgs+=("$ETCD_PKG"); else pkgs+=("k8s.io/kubernetes/cmd/$b"); fi
done
# A pre-release may import modules the module proxy does not serve (v1.38.0-beta.0: see the
# comment atop its go.mod); go build would only say "missing go.sum entry". Which command
# cannot be built, and for which package, comes from one go list (about 1 s).
if [[ "$K8S_VERSION" == *-* ]]; then
  unserved=$(k8s_go list -e -deps -f '{{if .Error}}{{(index .Error.ImportStack 0).Pkg}} {{.ImportPath}}{{end}}' "${pkgs[@]}" |
    awk '{sub(/.*\//, "", $1); if (!seen[$1]++) printf "%s%s (%s", sep, $1, $2; else if (!more[$1]++) printf ", ..."; sep = "), "} END {if (sep) print ")"}')
  [[ -z "$unserved" ]] ||
    die "Kubernetes $K8S_VERSION cannot be built here: the Go module proxy does not serve what these commands import: $unserved; see the comment atop $K8SBUILD_DIR/go.mod (a later pre-release or the release may be served whole: kind/localnode/k8sbuild/gen-gomod.sh pins it)"
fi
tmp="$LOCALNODE_CACHE/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp" "$LOCALNODE_BIN"
echo "build: go build ${bins[*]} ($K8S_VERSION, etcd $(etcd_pinned), $(k8s_go version | cut -d' ' -f3), GOCACHE=$(go env GOCACHE), GOMODCACHE=$(go env GOMODCACHE))"
still_compiling build
# One go build for all of them: shared packages compile once, both cores stay busy.
# (etcd's version is a constant of its api module; the -X flags do not touch it.)
CGO_ENABLED=0 k8s_go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
# go build names etcd's binary after its package path without the /v3: server.
[[ ! -e "$tmp/server" ]] || mv -f "$tmp/server" "$tmp/etcd"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$LOCALNODE_BIN/$b"; done
rmdir "$tmp"
build_stamp >"$LOCALNODE_BIN/.stamp"
"$LOCALNODE_BIN/kubelet" --version
echo "etcd $(etcd_version "$LOCALNODE_BIN/etcd")"
echo "build: done in $(elapsed)s -> $LOCALNODE_BIN"
