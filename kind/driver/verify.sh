#!/usr/bin/env bash
# make e2e-driver: a thin wrapper of `kubectl csi-registrar verify` (the plugin built
# from the tree): bring up the local node (or kind/cluster/cluster.yaml's cluster with
# E2E_PROVIDER=kind), load the images (csi-registrar's, the node pod's busybox, DRIVER_IMAGES,
# COMPARE) as DRIVER_IMAGES always were, run verify on every driver of DRIVERS with
# csi-registrar and, with COMPARE, again with that registrar (one table), and take the
# cluster down at the end (unless E2E_KEEP=1). AFTER_VERIFY: a shell command run on the
# same cluster once verify passed, before it goes down (KUBECONFIG, KUBECTL and PLUGIN
# set), its failure the run's. Run under the node lock (the Makefile).
#   PLUGIN IMAGE IMAGE_ARCHIVE NODE_IMAGE NODE_IMAGE_ARCHIVE DRIVERS [DRIVER_IMAGES] [COMPARE] \
#   [VERIFY_ARGS] [AFTER_VERIFY] [E2E_PROVIDER] [E2E_KEEP] bash kind/driver/verify.sh
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${PLUGIN:?}" "${IMAGE:?}" "${IMAGE_ARCHIVE:?}" "${NODE_IMAGE:?}" "${NODE_IMAGE_ARCHIVE:?}" "${DRIVERS:?}"
provider=${E2E_PROVIDER:-local}
archives=("$IMAGE_ARCHIVE" "$NODE_IMAGE_ARCHIVE")
IFS=, read -ra extra <<<"${DRIVER_IMAGES:-}"
for a in "${extra[@]}" ${COMPARE:+"$COMPARE"}; do [[ -z "$a" ]] || archives+=("$a"); done
flags=(--registrar-image "$IMAGE" --node-image "$NODE_IMAGE" --workdir bin/e2e/verify)
IFS=, read -ra drivers <<<"$DRIVERS"
for d in "${drivers[@]}"; do flags+=(-f "$d"); done
# The archive's image name is read by verify; the archive is loaded above.
[[ -z "${COMPARE:-}" ]] || flags+=(--compare "$COMPARE")

rc=0
s=$(date +%s)
case "$provider" in
  local)
    bash "$here/localnode/up.sh" || exit 3
    eval "$(bash "$here/localnode/env.sh")"
    down=(bash "$here/localnode/down.sh")
    bash "$here/localnode/load-image.sh" "${archives[@]}" >/dev/null || rc=3
    # The node is this machine: the cases ask the driver (NodeGetInfo) on its socket too.
    flags+=(--local-node-sockets) ;;
  kind)
    bash "$here/cluster/cluster.sh" up || exit 3
    eval "$(bash "$here/cluster/cluster.sh" env)"
    down=(bash "$here/cluster/cluster.sh" down)
    kind=$(bash -c 'source "$1/lib.sh" && kind_bin' _ "$here") || rc=3
    for a in "${archives[@]}"; do
      [[ $rc -ne 0 ]] || "$kind" load image-archive "$a" --name "${KIND_CLUSTER:-csi-registrar}" || rc=3
    done
    # A Deployment's pod may move to another node: act on every node, as the suite did.
    flags+=(--all-nodes) ;;
  *) echo "E2E_PROVIDER=$provider: use local or kind" >&2; exit 2 ;;
esac
echo "==== e2e-driver: $provider up, images loaded: $(( $(date +%s) - s )) s"
if [[ $rc -eq 0 ]]; then
  # shellcheck disable=SC2086  # VERIFY_ARGS are flags, split on purpose
  "$PLUGIN" verify --kubeconfig "$KUBECONFIG" --kubectl "$KUBECTL" "${flags[@]}" ${VERIFY_ARGS:-} || rc=$?
fi
if [[ $rc -eq 0 && -n "${AFTER_VERIFY:-}" ]]; then
  a=$(date +%s)
  KUBECONFIG=$KUBECONFIG KUBECTL=$KUBECTL PLUGIN=$PLUGIN bash -c "$AFTER_VERIFY" || rc=$?
  echo "==== e2e-driver: after verify ($AFTER_VERIFY): $(( $(date +%s) - a )) s"
fi
echo "==== e2e-driver: $(( $(date +%s) - s )) s"
if [[ -z "${E2E_KEEP:-}" ]]; then "${down[@]}" || { [[ $rc -ne 0 ]] || rc=1; }; fi
exit "$rc"
