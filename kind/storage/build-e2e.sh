#!/usr/bin/env bash
# Build Kubernetes' e2e test binary (k8s.io/kubernetes/test/e2e) at the node's version
# through internal/e2ebinary (builde2e/), the build of `kubectl csi-registrar storage-e2e`,
# here in the nested module kind/localnode/k8sbuild/<minor>/ (tools.go pins the package;
# the local node's Kubernetes was built from the same packages, so the Go build cache is
# shared). Cached where the plugin keeps it, $XDG_CACHE_HOME/csi-registrar/e2e/<version>/
# (~/.cache when unset): either finds the other's binary; skipped when current.
#   build-e2e.sh           build when not current; print the binary's path last
#   build-e2e.sh --path    print where the binary is (or will be), build nothing
# A cold build is ~25 CPU-minutes; warm, seconds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../localnode/env.sh
source "$here/../localnode/env.sh"
# shellcheck source=SCRIPTDIR/../localnode/lib.sh
source "$here/../localnode/lib.sh"
cd "$here/../.."
command -v go >/dev/null || die "go is not installed"
case "${1:-}" in
  --path) exec go run ./kind/storage/builde2e -release "$K8S_VERSION" -path ;;
  "") ;;
  *) echo "build-e2e.sh: unknown argument $1 (use --path, or none)" >&2; exit 2 ;;
esac
grep -q '"k8s.io/kubernetes/test/e2e"' "$K8SBUILD_DIR/tools.go" ||
  die "Kubernetes $K8S_VERSION: $K8SBUILD_DIR/tools.go does not pin k8s.io/kubernetes/test/e2e, so its e2e binary cannot be built here (gen-gomod.sh leaves it out when it does not resolve through the module proxy, as for 1.34: k8s.io/sample-apiserver v0.34.x is not there); use K8S=1.35 or newer"
build_lock build-e2e # build.sh's: one Go build of this version at a time
go run ./kind/storage/builde2e -release "$K8S_VERSION" -module "$K8SBUILD_DIR"
