#!/usr/bin/env bash
# Print what the kubelet wrote for the driver on every node: the Node
# annotation csi.volume.kubernetes.io/nodeid, the CSINode entry and the
# topology label. Needs KUBECTL and KUBECONFIG (kind/lib.sh use_cluster).
set -euo pipefail
DRIVER=${DRIVER:-stub.csi.example.com}
TOPOLOGY_KEY=${TOPOLOGY_KEY:-topology.stub.csi.example.com/zone}
K=${KUBECTL:-kubectl}
for node in $("$K" get nodes -o jsonpath='{.items[*].metadata.name}'); do
  echo "node $node"
  echo "  annotation csi.volume.kubernetes.io/nodeid: $("$K" get node "$node" -o jsonpath='{.metadata.annotations.csi\.volume\.kubernetes\.io/nodeid}')"
  echo "  CSINode entry: $("$K" get csinode "$node" -o jsonpath="{.spec.drivers[?(@.name==\"$DRIVER\")]}")"
  echo "  label $TOPOLOGY_KEY: $("$K" get node "$node" -o jsonpath="{.metadata.labels.${TOPOLOGY_KEY//./\\.}}")"
done
