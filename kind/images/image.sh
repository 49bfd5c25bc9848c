#!/usr/bin/env bash
# make image: the container image $IMAGE from the Dockerfile and bin/rootfs,
# built with docker if an engine answers, else with buildah ($BUILDAH: vfs
# storage under $BUILDAH_ROOT, no daemon; installed if missing), and saved as
# the docker-archive $IMAGE_TAR that kind and kind/localnode/load-image.sh load.
#   IMAGE=... IMAGE_TAR=... VERSION=... BUILDAH="buildah --root ..." BUILDAH_ROOT=... kind/images/image.sh
set -euo pipefail
: "${IMAGE:?}" "${IMAGE_TAR:?}" "${VERSION:?}"
if docker info >/dev/null 2>&1; then
  echo "building $IMAGE with docker"
  docker build --build-arg VERSION="$VERSION" -t "$IMAGE" .
  docker save -o "$IMAGE_TAR" "$IMAGE"
else
  command -v buildah >/dev/null || { echo "no Docker engine answers and buildah is not installed: installing it"
    bash kind/localnode/install-deps.sh buildah; }
  echo "no Docker engine answers: building $IMAGE with buildah"
  mkdir -p "${BUILDAH_ROOT:?}"
  read -ra B <<<"${BUILDAH:?}"
  "${B[@]}" build --quiet --isolation chroot --build-arg VERSION="$VERSION" -t "$IMAGE" . >/dev/null
  rm -f "$IMAGE_TAR"
  "${B[@]}" push --quiet "$IMAGE" "docker-archive:$IMAGE_TAR:$IMAGE"
fi
echo "image $IMAGE: $(stat -c %s "$IMAGE_TAR") bytes in $IMAGE_TAR"
