#!/usr/bin/env bash
# Pod network of a kind cluster without kindnetd (the offline node image has none:
# its image is not obtainable without a registry, nor is its source as a Go module).
# What kindnetd does for a cluster whose nodes share one Docker network, done once:
# on every node a bridge CNI configuration with the pod CIDR the controller manager
# gave that node, and a route to every other node's pod CIDR via that node's address
# (the API server on the control plane reaches pods on the workers: the e2e suite
# reads /readyz through its pod proxy).
#   network.sh CLUSTER      needs KUBECONFIG, KUBECTL and the engine's DOCKER_HOST
# Idempotent. The routes live in the node containers' network namespaces; the host's
# routes, iptables and sysctls are not touched.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$here/../lib.sh"
cluster=${1:?usage: $0 CLUSTER}
K=${KUBECTL:?}

mapfile -t nodes < <("$(kind_bin)" get nodes --name "$cluster")
[[ ${#nodes[@]} -gt 0 ]] || die "kind cluster $cluster has no nodes"
declare -A addr cidr
for n in "${nodes[@]}"; do
  addr[$n]=$(docker_cli inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$n")
  # The controller manager allocates the node's pod CIDR right after the node registers.
  for ((i = 0; i < 300; i++)); do
    cidr[$n]=$("$K" get node "$n" -o jsonpath='{.spec.podCIDR}' 2>/dev/null || true)
    [[ -z "${cidr[$n]}" ]] || break
    sleep 0.2
  done
  [[ -n "${cidr[$n]}" && -n "${addr[$n]}" ]] || die "node $n: no pod CIDR or no address after 60s (podCIDR '${cidr[$n]}', address '${addr[$n]}')"
done

for n in "${nodes[@]}"; do
  docker_cli exec -i "$n" sh -c 'cat > /etc/cni/net.d/10-csi-registrar.conflist.tmp && mv /etc/cni/net.d/10-csi-registrar.conflist.tmp /etc/cni/net.d/10-csi-registrar.conflist' <<EOT
{
  "cniVersion": "0.4.0",
  "name": "csi-registrar-kind",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${cidr[$n]}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOT
  for m in "${nodes[@]}"; do
    [[ "$m" == "$n" ]] && continue
    docker_cli exec "$n" ip route replace "${cidr[$m]}" via "${addr[$m]}"
  done
  echo "  $n: ${addr[$n]}, pods ${cidr[$n]}"
done
