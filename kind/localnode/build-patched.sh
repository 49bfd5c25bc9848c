#!/usr/bin/env bash
# The local node with a patched kubelet (K8S_PATCH=NAME; build.sh runs this): the stock
# build of the pinned release first (build.sh without K8S_PATCH: cached), then the kubelet
# again from a copy of k8s.io/kubernetes' source with patches/NAME-<minor>.patch applied,
# and the other binaries linked from the stock build, into the patched node's own cache
# dir (LOCALNODE_KEY = v1.37.2+NAME). The module cache is never written: the copy lives in
# <cache>/src/ and a go.mod of its own (<cache>/src/go.mod: k8sbuild/<minor>/'s, plus a
# replace of k8s.io/kubernetes with the copy) builds from it. The kubelet says
# `Kubernetes v1.37.2+NAME`. Cold, every package of k8s.io/kubernetes the kubelet links
# compiles again (the copy is another module directory to the Go build cache).
#   build-patched.sh [--force]
#   build-patched.sh --source   only the patched copy (kept while current); prints its path
#                               (make test-pluginmanager-patched builds against it)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

[[ -n "$K8S_PATCH" ]] || die "build-patched.sh: K8S_PATCH is not set (the stock build is build.sh's)"
force=0 only_source=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --source) only_source=1 ;;
    *) die "build-patched.sh: $arg is not supported with K8S_PATCH=$K8S_PATCH (only --force and --source; the kind node image takes the stock build: unset K8S_PATCH)" ;;
  esac
done
command -v go >/dev/null || die "go is not installed"
command -v patch >/dev/null || bash "$(dirname "${BASH_SOURCE[0]}")/install-deps.sh" patch >&2
src="$LOCALNODE_CACHE/src"

# patched_source: <cache>/src/kubernetes, a copy of the pinned k8s.io/kubernetes with the
# patch applied, and <cache>/src/go.mod; made again when the pin or the patch changed.
patched_source() {
  [[ $force == 0 && -f "$src/.stamp" && "$(<"$src/.stamp")" == "$(build_stamp)" ]] && return 0
  local mod
  mod=$(cd "$K8SBUILD_DIR" && k8s_go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  [[ -d "$mod" ]] || die "k8s.io/kubernetes $K8S_VERSION is not in the module cache ($mod)"
  step "copying $mod to $src/kubernetes and applying $(basename "$K8S_PATCH_FILE")"
  rm -rf "$src" && mkdir -p "$src"
  cp -R "$mod" "$src/kubernetes"
  chmod -R u+w "$src/kubernetes"
  patch -d "$src/kubernetes" -p1 --forward --batch --no-backup-if-mismatch <"$K8S_PATCH_FILE" ||
    die "$K8S_PATCH_FILE does not apply to k8s.io/kubernetes $K8S_VERSION: it is a unified diff against that release (regenerate it against the pin of k8sbuild/$K8S_MINOR/go.mod)"
  cp "$K8SBUILD_DIR/go.mod" "$src/go.mod"
  cp "$K8SBUILD_DIR/go.sum" "$src/go.sum"
  k8s_go mod edit -replace "k8s.io/kubernetes=$src/kubernetes" "$src/go.mod"
  build_stamp >"$src/.stamp"
}

if [[ $only_source == 1 ]]; then
  build_lock build >&2
  patched_source >&2
  echo "$src/kubernetes"
  exit 0
fi
build_lock build
if [[ $force == 0 ]] && build_is_current; then
  echo "build: Kubernetes $LOCALNODE_KEY (kubelet patched with $K8S_PATCH_FILE) is current in $LOCALNODE_BIN"
  exit 0
fi

step "stock Kubernetes $K8S_VERSION first (build.sh; cached when current)"
stock_bin=$(K8S_PATCH='' LOCALNODE_K8S_VERSION=$K8S_VERSION bash -c 'source "$1/env.sh" && echo "$LOCALNODE_BIN"' _ "$here")
K8S_PATCH='' LOCALNODE_K8S_VERSION=$K8S_VERSION bash "$here/build.sh"
patched_source

tmp="$LOCALNODE_CACHE/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp" "$LOCALNODE_BIN"
ldflags=$(k8s_ldflags "$LOCALNODE_KEY")
step "go build kubelet ($LOCALNODE_KEY; cold: every k8s.io/kubernetes package it links compiles again)"
still_compiling build
cd "$K8SBUILD_DIR"
CGO_ENABLED=0 k8s_go build -modfile "$src/go.mod" -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" k8s.io/kubernetes/cmd/kubelet
mv -f "$tmp/kubelet" "$LOCALNODE_BIN/kubelet"
rmdir "$tmp"
for b in "${NODE_BINS[@]}"; do
  [[ $b == kubelet ]] && continue
  # Hard links (the stock build replaces its binaries by rename, never in place).
  ln -f "$stock_bin/$b" "$LOCALNODE_BIN/$b" 2>/dev/null || cp -f "$stock_bin/$b" "$LOCALNODE_BIN/$b"
done
build_stamp >"$LOCALNODE_BIN/.stamp"
"$LOCALNODE_BIN/kubelet" --version
echo "build: done in $(elapsed)s -> $LOCALNODE_BIN"
