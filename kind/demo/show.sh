#!/usr/bin/env bash
# Print what the kubelet wrote for the driver on every node: the Node
# annotation csi.volume.kubernetes.io/nodeid, the CSINode entry and the
# topology label. Needs KUBECTL and KUBECONFIG (kind/lib.sh use_cluster).
#   show.sh          print it now
#   show.sh --wait   first wait (up to WAIT_SECONDS, default 120) until every
#                    node's CSINode lists the driver, then print it
# The demo waits here rather than trusting `kubectl rollout status`: for a
# DaemonSet that counts any available pod, so it can return while the old pod
# is still counted and before the new one has registered.
set -euo pipefail
DRIVER=${DRIVER:-stub.csi.example.com}
TOPOLOGY_KEY=${TOPOLOGY_KEY:-topology.stub.csi.example.com/zone}
K=${KUBECTL:-kubectl}

# csinode_entry NODE: the driver's entry in the node's CSINode, or nothing.
# (A range over .spec.drivers prints nothing when the list is empty, where a
# filter expression would fail.)
csinode_entry() {
  "$K" get csinode "$1" -o jsonpath='{range .spec.drivers[*]}{.name}{"\t"}{@}{"\n"}{end}' 2>/dev/null |
    awk -F'\t' -v d="$DRIVER" '$1 == d { print $2 }'
}

nodes=$("$K" get nodes -o jsonpath='{.items[*].metadata.name}')

if [[ "${1:-}" == --wait ]]; then
  start=$SECONDS
  limit=${WAIT_SECONDS:-120}
  for node in $nodes; do
    until [[ -n "$(csinode_entry "$node")" ]]; do
      if (( SECONDS - start >= limit )); then
        echo "error: after ${limit}s the CSINode of node $node does not list $DRIVER;" \
          "check: $K -n csi-registrar logs ds/csi-stub-node -c registrar" >&2
        exit 1
      fi
      sleep 0.5
    done
  done
  echo "every node's CSINode lists $DRIVER (waited $(( SECONDS - start ))s)"
fi

for node in $nodes; do
  echo "node $node"
  echo "  annotation csi.volume.kubernetes.io/nodeid: $("$K" get node "$node" -o jsonpath='{.metadata.annotations.csi\.volume\.kubernetes\.io/nodeid}')"
  echo "  CSINode entry: $(csinode_entry "$node")"
  echo "  label $TOPOLOGY_KEY: $("$K" get node "$node" -o jsonpath="{.metadata.labels.${TOPOLOGY_KEY//./\\.}}")"
done
