#!/usr/bin/env bash
# The Node Readiness Controller's image (kubernetes-sigs/node-readiness-controller,
# the manager of its cmd/), built here from a git checkout of its source, for
# kind/e2e/nodereadiness_controller_test.go only: the tag extracted under bin/,
# its modules downloaded through the Go module proxy, the binary built static,
# FROM scratch with entrypoint /manager, saved as a docker-archive that kind
# loads. Its CRD is copied beside the archive (ARCHIVE.crd.yaml): the suite
# applies it at test time. Nothing of it is committed.
#   BUILDAH="buildah --root ..." node-readiness-controller-image.sh GIT_DIR TAG IMAGE ARCHIVE
# Cached: nothing is done when ARCHIVE and its CRD are newer than this script
# and the archive was built from the same commit (ARCHIVE.commit).
set -euo pipefail
[[ $# -eq 4 ]] || { echo "usage: $0 GIT_DIR TAG IMAGE ARCHIVE (e.g. ../node-readiness-controller/.git v0.5.0 localhost/node-readiness-controller:v0.5.0 bin/node-readiness-controller-image.tar)" >&2; exit 2; }
src=$1 tag=$2 image=$3 tar=$4
self="${BASH_SOURCE[0]}"
# shellcheck source=kind/images/lib.sh
source "$(dirname "$self")/lib.sh"
crd_path=config/crd/bases/readiness.node.x-k8s.io_nodereadinessrules.yaml
[[ -n "$src" ]] && git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "NRC_SRC=${src:-<empty>}: not a git directory; want a clone of https://github.com/kubernetes-sigs/node-readiness-controller (its .git directory or a bare clone), e.g. make node-readiness-controller-image NRC_SRC=../node-readiness-controller/.git" >&2; exit 2; }
commit=$(git --git-dir="$src" rev-parse --verify -q "$tag^{commit}") ||
  { echo "$src has no $tag: fetch its tags (git --git-dir=$src fetch --tags) or set NRC_TAG=..." >&2; exit 2; }
if [[ -s "$tar" && -s "$tar.crd.yaml" && "$tar" -nt "$self" && "$(cat "$tar.commit" 2>/dev/null)" == "$commit" ]]; then
  echo "image $image: $tar is current ($tag, $commit)"
  exit 0
fi
work="$(dirname "$tar")/node-readiness-controller-build"
rm -rf "$work" && mkdir -p "$work/src" "$work/rootfs"
git --git-dir="$src" archive "$commit" | tar -x -C "$work/src"
[[ -f "$work/src/cmd/main.go" && -f "$work/src/$crd_path" ]] ||
  { echo "$src at $tag holds no cmd/main.go and $crd_path: not the Node Readiness Controller's source" >&2; exit 1; }
echo "building the Node Readiness Controller $tag ($commit) from $src"
(cd "$work/src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" \
  -o "$(cd ../rootfs && pwd)/manager" ./cmd)
cat >"$work/Containerfile" <<'EOC'
FROM scratch
COPY manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
EOC
save_image_archive "$work/Containerfile" "$work/rootfs" "$image" "$tar"
cp "$work/src/$crd_path" "$tar.crd.yaml"
mv "$tar.tmp" "$tar"
echo "$commit" >"$tar.commit"
rm -rf "$work"
echo "image $image: $(stat -c %s "$tar") bytes in $tar, its CRD in $tar.crd.yaml"
