#!/usr/bin/env bash
# Build the example workload image FROM scratch, as `make image` builds the
# project's: with docker if an engine answers, else with buildah (the
# Makefile's $BUILDAH, vfs storage, no daemon), and save it as a
# docker-archive tarball that kind and kind/localnode/load-image.sh load.
#   BUILDAH="buildah --root ..." build-image.sh IMAGE TARBALL CONTEXT
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 IMAGE TARBALL CONTEXT" >&2; exit 2; }
image=$1 tar=$2 ctx=$3
dockerfile="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/Dockerfile"
if docker info >/dev/null 2>&1; then
  echo "building $image with docker"
  docker build -f "$dockerfile" -t "$image" "$ctx"
  docker save -o "$tar" "$image"
else
  command -v buildah >/dev/null || { echo "no Docker engine and no buildah: apt-get install buildah" >&2; exit 1; }
  echo "no Docker engine answers: building $image with buildah"
  read -ra B <<<"${BUILDAH:-buildah}"
  "${B[@]}" build --quiet --isolation chroot -f "$dockerfile" -t "$image" "$ctx" >/dev/null
  rm -f "$tar"
  "${B[@]}" push --quiet "$image" "docker-archive:$tar:$image"
fi
echo "image $image: $(stat -c %s "$tar") bytes in $tar"
