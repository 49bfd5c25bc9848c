#!/usr/bin/env bash
# Build the busybox image Kubernetes' e2e suite runs its test pods with, FROM scratch:
# Debian's busybox-static (/bin/busybox) and a /bin symlink per applet, saved as a
# docker-archive that kind and kind/localnode/load-image.sh load. Nothing is pulled.
#   busybox-image.sh IMAGE_REF OUT_TAR
# IMAGE_REF is the name the suite asks for (e2e.test --list-images with the repo list,
# e.g. localhost/e2e-test-images/busybox:1.37.0-2). Skipped when OUT_TAR is current.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -eq 2 ]] || { echo "usage: $0 IMAGE_REF OUT_TAR" >&2; exit 2; }
ref=$1 out=$2
# shellcheck source=SCRIPTDIR/../localnode/images/scratch.sh
source "$here/../localnode/images/scratch.sh"

bash "$here/../localnode/install-deps.sh" busybox-static buildah >/dev/null
sum="$(dpkg-query -W -f='${Version}' busybox-static) $ref"
if image_current "$out" "$sum"; then
  echo "busybox image: $out is current ($ref)"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/tmp" && chmod 1777 "$work/tmp"
cp /bin/busybox "$work/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ $applet == busybox ]] || ln -s busybox "$work/bin/$applet"
done
scratch_image "${XDG_CACHE_HOME:-$HOME/.cache}/csi-registrar/buildah" "$ref" "$out" "$sum" "$work" \
  --cmd '["/bin/sh"]' --env PATH=/bin --label org.opencontainers.image.title=csi-registrar-e2e-busybox
echo "busybox image: built $ref -> $out ($(stat -c %s "$out") bytes)"
