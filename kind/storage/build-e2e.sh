#!/usr/bin/env bash
# Build Kubernetes' e2e test binary (k8s.io/kubernetes/test/e2e) at the node's version,
# from the nested module kind/localnode/k8sbuild/<minor>/ (tools.go pins the package),
# with build.sh's flags, so it shares the Go build cache with the Kubernetes binaries.
# Cached in the version-keyed cache dir; skipped when current (same go.mod/go.sum stamp).
#   build-e2e.sh [--force]      build when not current
#   build-e2e.sh --path         print where the binary is (or will be), build nothing
# A cold build is ~25 CPU-minutes; warm, seconds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../localnode/env.sh
source "$here/../localnode/env.sh"
# shellcheck source=SCRIPTDIR/../localnode/lib.sh
source "$here/../localnode/lib.sh"

out_dir="$LOCALNODE_CACHE/e2e"
bin="$out_dir/e2e.test"
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --path) echo "$bin"; exit 0 ;;
    *) echo "build-e2e.sh: unknown argument $arg (use --force or --path)" >&2; exit 2 ;;
  esac
done
current() { [[ -x "$bin" && -f "$out_dir/.stamp" && "$(<"$out_dir/.stamp")" == "$(build_stamp)" ]]; }

build_lock build-e2e # build.sh's: one Go build of this version at a time
if [[ $force == 0 ]] && current; then
  echo "build-e2e: e2e.test $K8S_VERSION is current: $bin"
  exit 0
fi
command -v go >/dev/null || die "go is not installed"
grep -q '"k8s.io/kubernetes/test/e2e"' "$K8SBUILD_DIR/tools.go" ||
  die "Kubernetes $K8S_VERSION: $K8SBUILD_DIR/tools.go does not pin k8s.io/kubernetes/test/e2e, so its e2e binary cannot be built here (gen-gomod.sh leaves it out when it does not resolve through the module proxy, as for 1.34: k8s.io/sample-apiserver v0.34.x is not there); use K8S=1.35 or newer"

cd "$K8SBUILD_DIR"
ldflags=$(k8s_ldflags) # build.sh's (the suite reads the version only for its banner)
mkdir -p "$out_dir"
echo "build-e2e: go test -c k8s.io/kubernetes/test/e2e ($K8S_VERSION, GOCACHE=$(go env GOCACHE)); cold: ~25 CPU-minutes"
still_compiling build-e2e
CGO_ENABLED=0 go test -c -trimpath -buildvcs=false -ldflags "$ldflags" -o "$bin.tmp" k8s.io/kubernetes/test/e2e
mv -f "$bin.tmp" "$bin"
build_stamp >"$out_dir/.stamp"
echo "build-e2e: done in $(elapsed)s -> $bin ($(du -m "$bin" | cut -f1) MB)"
