#!/usr/bin/env bash
# Helpers for an image built FROM scratch with buildah (no Docker engine, no registry),
# saved as a docker-archive tarball that `ctr images import` and kind understand.
# Source it; used by build-pause.sh and kind/storage/busybox-image.sh.

# image_current OUT SUM: OUT was built from SUM (a digest of the sources and the image
# name, kept in OUT.src), so building it again would change nothing.
image_current() { [[ -s "$1" && -f "$1.src" && "$(<"$1.src")" == "$2" ]]; }

# scratch_image STORE REF OUT SUM ROOTFS [CONFIG_ARG...]: builds the image REF whose
# root is the directory ROOTFS, configured with `buildah config CONFIG_ARG...`, in the
# buildah storage dir STORE, into OUT (replaced) and records SUM in OUT.src. The
# working container is removed also when a step fails.
scratch_image() {
  local store=$1 ref=$2 out=$3 sum=$4 rootfs=$5 ctr
  shift 5
  local B=(buildah --root "$store/root" --runroot "$store/runroot" --storage-driver vfs)
  mkdir -p "$store" "$(dirname "$out")"
  chmod 0755 "$rootfs"
  ctr=$("${B[@]}" from scratch) || return
  if ! { "${B[@]}" copy "$ctr" "$rootfs/" / >/dev/null &&
    "${B[@]}" config "$@" "$ctr" >/dev/null &&
    rm -f "$out" "$out.src" &&
    "${B[@]}" commit --quiet --rm "$ctr" "docker-archive:$out:$ref" >/dev/null; }; then
    "${B[@]}" rm "$ctr" >/dev/null 2>&1 || true
    return 1
  fi
  echo "$sum" >"$out.src"
}
