#!/usr/bin/env bash
# Build the non-compliant example drivers' image FROM scratch (docker if an
# engine answers, else buildah, as `make image`) and save it as a
# docker-archive that kind and kind/localnode/load-image.sh load.
#   GO=go BUILDAH="buildah --root ..." build-image.sh IMAGE TARBALL
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 IMAGE TARBALL" >&2; exit 2; }
image=$1 tar=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
for f in memvolumes loadatstart stopatterm removesockets; do
  CGO_ENABLED=0 "${GO:-go}" build -trimpath -ldflags=-s -o "$ctx/$f" "$here/$f"
done
if docker info >/dev/null 2>&1; then
  docker build -f "$here/Dockerfile" -t "$image" "$ctx" >/dev/null
  docker save -o "$tar" "$image"
else
  command -v buildah >/dev/null || bash "$here/../../../kind/localnode/install-deps.sh" buildah
  read -ra B <<<"${BUILDAH:-buildah}"
  "${B[@]}" build --quiet --isolation chroot -f "$here/Dockerfile" -t "$image" "$ctx" >/dev/null
  rm -f "$tar"
  "${B[@]}" push --quiet "$image" "docker-archive:$tar:$image"
fi
echo "image $image: $(stat -c %s "$tar") bytes in $tar"
