#!/usr/bin/env bash
# Import image tarballs (docker-archive or OCI archive, e.g. from `buildah push ...
# docker-archive:FILE:NAME`) into the local node's containerd, namespace k8s.io, where
# the kubelet finds them. Use imagePullPolicy: Never or IfNotPresent: nothing can be pulled.
#   load-image.sh IMAGE.tar [IMAGE.tar...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

[[ $# -ge 1 ]] || { echo "usage: $0 IMAGE.tar [IMAGE.tar...]" >&2; exit 2; }
containerd_ok >/dev/null 2>&1 || die "the local node's containerd is not running (kind/localnode/up.sh)"
for f in "$@"; do
  [[ -r "$f" ]] || die "cannot read $f"
  c images import "$f"
done
