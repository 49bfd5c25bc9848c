#!/usr/bin/env bash
# Build the local node's pause image FROM scratch with buildah (no Docker engine, no
# registry) as a docker-archive tarball that `ctr images import` understands.
#   build-pause.sh [IMAGE_REF [OUT_TAR]]
# Defaults: the sandbox image the node's containerd is configured with, written to
# <cache>/images/pause.tar. Skips the build when OUT_TAR is newer than the source.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../env.sh
source "$here/../env.sh"
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"
# shellcheck source=SCRIPTDIR/scratch.sh
source "$here/scratch.sh"

ref=${1:-$PAUSE_IMAGE}
out=${2:-$IMAGES_DIR/pause.tar}
src="$here/pause/main.go"
sum="$(sha256sum "$src" | cut -c1-16) $ref"
if image_current "$out" "$sum"; then
  echo "pause image: $out is current ($ref)"
  exit 0
fi

mkdir -p "$LOCALNODE_CACHE/buildah"
work=$(mktemp -d "$LOCALNODE_CACHE/buildah/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$here/pause" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' -o "$work/pause" .)
chmod 0755 "$work/pause"
scratch_image "$LOCALNODE_CACHE/buildah" "$ref" "$out" "$sum" "$work" \
  --entrypoint '["/pause"]' --cmd '' --user 65535:65535 \
  --label org.opencontainers.image.title=csi-registrar-localnode-pause
echo "pause image: built $ref -> $out ($(stat -c %s "$out") bytes)"
