#!/usr/bin/env bash
# The images Kubernetes' e2e suite runs its pods with, built here instead of pulled:
# writes OUT_DIR/repo-list.yaml (the suite's KUBE_TEST_REPO_LIST: every test image
# under localhost/e2e-test-images), asks the suite which busybox it wants with that
# list (e2e.test --list-images) and builds it into OUT_DIR/busybox.tar.
#   images.sh E2E_TEST OUT_DIR
# The External storage specs of CSI ephemeral volumes need busybox only; agnhost and
# the others are not built (a spec that needs one fails on ErrImageNeverPull/pull errors).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -eq 2 ]] || { echo "usage: $0 E2E_TEST OUT_DIR" >&2; exit 2; }
e2e=$1 out=$2
[[ -x "$e2e" ]] || { echo "images.sh: $e2e is not an executable e2e test binary (kind/storage/build-e2e.sh builds it)" >&2; exit 1; }
mkdir -p "$out"
registry=localhost/e2e-test-images
cat >"$out/repo-list.yaml" <<EOT
# Written by kind/storage/images.sh: the e2e suite's images come from $registry,
# built here and loaded on the nodes; nothing is pulled.
promoterE2eRegistry: $registry
gcRegistry: $registry
sigStorageRegistry: $registry
dockerLibraryRegistry: $registry
EOT
# TMPDIR: the binary leaves temporary kuberc files behind at start-up.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
images=$(TMPDIR="$tmp" KUBE_TEST_REPO_LIST="$out/repo-list.yaml" "$e2e" --list-images 2>/dev/null) ||
  { echo "images.sh: $e2e --list-images failed" >&2; exit 1; }
busybox=$(grep -m1 "^$registry/busybox:" <<<"$images") ||
  { echo "images.sh: $e2e --list-images names no $registry/busybox image" >&2; exit 1; }
bash "$here/busybox-image.sh" "$busybox" "$out/busybox.tar"
