# Shared by upstream-image.sh and node-readiness-controller-image.sh: saving an
# image built from a Containerfile as a docker-archive, with docker when an
# engine answers, otherwise with buildah (installed when missing; BUILDAH may
# carry its global flags, e.g. "buildah --root ...").
# shellcheck shell=bash

# save_image_archive CONTAINERFILE CONTEXT IMAGE ARCHIVE: build IMAGE from
# CONTAINERFILE over CONTEXT and write it to ARCHIVE.tmp (the caller moves it
# into place once the rest of its output is there).
save_image_archive() {
  local file=$1 context=$2 image=$3 tar=$4
  if docker info >/dev/null 2>&1; then
    echo "building $image with docker"
    docker build -q -f "$file" -t "$image" "$context" >/dev/null
    docker save -o "$tar.tmp" "$image"
  else
    command -v buildah >/dev/null || bash "$(dirname "${BASH_SOURCE[0]}")/../localnode/install-deps.sh" buildah
    echo "no Docker engine answers: building $image with buildah"
    local B
    read -ra B <<<"${BUILDAH:-buildah}"
    "${B[@]}" build --quiet --isolation chroot -f "$file" -t "$image" "$context" >/dev/null
    rm -f "$tar.tmp"
    "${B[@]}" push --quiet "$image" "docker-archive:$tar.tmp:$image"
  fi
}
