#!/usr/bin/env bash
# node-driver-registrar's image, built here from its source archive (a test
# fixture kept beside the project, see ../shared/upstream/README.md), for the
# side-by-side figures only (kind/e2e/migration_test.go): the binary built as
# upstream's Makefile builds it (vendored modules, static, version stamped),
# FROM scratch with entrypoint /csi-node-driver-registrar, saved as a
# docker-archive that kind and kind/localnode/load-image.sh load. Nothing of
# it is committed: the source is extracted and built under bin/.
#   BUILDAH="buildah --root ..." upstream-image.sh SOURCE.tar.gz IMAGE ARCHIVE
# Cached: nothing is done when ARCHIVE is newer than SOURCE.tar.gz and this script.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 SOURCE.tar.gz IMAGE ARCHIVE (e.g. ../shared/upstream/node-driver-registrar-v2.17.0.tar.gz localhost/node-driver-registrar:v2.17.0 bin/upstream-image.tar)" >&2; exit 2; }
src=$1 image=$2 tar=$3
self="${BASH_SOURCE[0]}"
# shellcheck source=kind/images/lib.sh
source "$(dirname "$self")/lib.sh"
[[ -r "$src" ]] || { echo "$src: cannot read it (want node-driver-registrar's source archive, e.g. ../shared/upstream/node-driver-registrar-v2.17.0.tar.gz; set UPSTREAM_SRC=...)" >&2; exit 2; }
if [[ -s "$tar" && "$tar" -nt "$src" && "$tar" -nt "$self" ]]; then
  echo "image $image: $tar is current (newer than $src)"
  exit 0
fi
# The archive's checksum, when its SHA256SUMS is beside it.
sums="$(dirname "$src")/SHA256SUMS"
if [[ -r "$sums" ]] && grep -q " $(basename "$src")\$" "$sums"; then
  (cd "$(dirname "$src")" && grep " $(basename "$src")\$" SHA256SUMS | sha256sum -c --quiet -) ||
    { echo "$src does not match $sums: a damaged or changed copy; restore it" >&2; exit 1; }
fi
# The version, from the archive's name (node-driver-registrar-vX.Y.Z.tar.gz).
version=$(basename "$src" .tar.gz)
version=${version##*-}
[[ "$version" == v* ]] || version=unknown
work="$(dirname "$tar")/upstream-build"
rm -rf "$work" && mkdir -p "$work/src" "$work/rootfs"
tar -xzf "$src" -C "$work/src"
[[ -d "$work/src/cmd/csi-node-driver-registrar" ]] ||
  { echo "$src holds no cmd/csi-node-driver-registrar at its top: not node-driver-registrar's source" >&2; exit 1; }
echo "building csi-node-driver-registrar $version from $src"
(cd "$work/src" && CGO_ENABLED=0 nice -n 10 go build -mod=vendor -ldflags "-s -w -X main.version=$version" \
  -o "$(cd ../rootfs && pwd)/csi-node-driver-registrar" ./cmd/csi-node-driver-registrar)
cat >"$work/Containerfile" <<'EOF'
FROM scratch
COPY csi-node-driver-registrar /csi-node-driver-registrar
ENTRYPOINT ["/csi-node-driver-registrar"]
EOF
save_image_archive "$work/Containerfile" "$work/rootfs" "$image" "$tar"
mv "$tar.tmp" "$tar"
rm -rf "$work"
echo "image $image: $(stat -c %s "$tar") bytes in $tar"
