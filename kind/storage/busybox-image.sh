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

bash "$here/../localnode/install-deps.sh" busybox-static buildah >/dev/null
sum="$(dpkg-query -W -f='${Version}' busybox-static) $ref"
if [[ -s "$out" && -f "$out.src" && "$(<"$out.src")" == "$sum" ]]; then
  echo "busybox image: $out is current ($ref)"
  exit 0
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/csi-registrar/buildah"
B=(buildah --root "$cache/root" --runroot "$cache/runroot" --storage-driver vfs)
mkdir -p "$cache" "$(dirname "$out")"
work=$(mktemp -d)
ctr=""
cleanup() {
  [[ -n "$ctr" ]] && "${B[@]}" rm "$ctr" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/bin" "$work/tmp" && chmod 1777 "$work/tmp"
cp /bin/busybox "$work/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ $applet == busybox ]] || ln -s busybox "$work/bin/$applet"
done
ctr=$("${B[@]}" from scratch)
"${B[@]}" copy "$ctr" "$work/" / >/dev/null
"${B[@]}" config --cmd '["/bin/sh"]' --env PATH=/bin \
  --label org.opencontainers.image.title=csi-registrar-e2e-busybox "$ctr" >/dev/null
rm -f "$out" "$out.src"
"${B[@]}" commit --quiet --rm "$ctr" "docker-archive:$out:$ref" >/dev/null
ctr=""
echo "$sum" >"$out.src"
echo "busybox image: built $ref -> $out ($(stat -c %s "$out") bytes)"
