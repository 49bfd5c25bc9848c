#!/usr/bin/env bash
# make bench-status-scale: `kubectl csi-registrar status` against thousands of
# simulated nodes (kind/bench/statusscale/main.go). kwok (sigs.k8s.io/kwok, built
# here from the Go module proxy into the cache) keeps the fake Nodes Ready on
# the local node's real API server; the local node is (re)started with its
# controller manager's and scheduler's API rate limits raised, and stopped at
# the end (started again as it was if it was up). Everything created is
# removed. The caller holds the local node's lock. The simulated nodes and
# pods have loopback addresses (node 127.0.0.1 and "localhost", pods in
# 127.128.0.0/16): the API server refuses to proxy to them at once, so that
# no proxy call of the plugin leaves the host.
#   statusscale.sh [statusscale flags, e.g. -nodes=2000; -cleanup-only after an interrupted run]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
QPS=${STATUS_SCALE_QPS:-300}
out=bin/bench/status-scale
mkdir -p "$out"
kwok_bin="${XDG_CACHE_HOME:-$HOME/.cache}/csi-registrar/kwok/$KWOK_VERSION/kwok"
if [[ ! -x "$kwok_bin" ]]; then
  echo "building kwok $KWOK_VERSION into $(dirname "$kwok_bin")"
  GOBIN="$(dirname "$kwok_bin")" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi
[[ -x bin/kubectl-csi_registrar ]] || { echo "bin/kubectl-csi_registrar missing: make build" >&2; exit 1; }
go build -o "$out/statusscale" ./kind/bench/statusscale

was_up=0
bash kind/localnode/status.sh && was_up=1
echo "restarting the local node with the control plane's API rate limits at $QPS QPS"
bash kind/localnode/down.sh >"$out/localnode.log" 2>&1
LOCALNODE_CONTROL_PLANE_QPS=$QPS bash kind/localnode/up.sh >>"$out/localnode.log" 2>&1
eval "$(bash kind/localnode/env.sh)"

rc=0
if [[ " $* " != *" -cleanup-only "* ]]; then
  # kwok's own stages (Ready nodes, running pods), from its module.
  stages="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  for f in node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$stages/$f"
  done >"$out/stages.yaml"
  "$kwok_bin" --kubeconfig="$KUBECONFIG" --config="$out/stages.yaml" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 --server-address=127.0.0.1:10247 \
    --node-ip=127.0.0.1 --cidr=127.128.0.0/16 \
    >"$out/kwok.log" 2>&1 &
  kwok_pid=$!
  "$out/statusscale" -kubeconfig="$KUBECONFIG" -plugin=bin/kubectl-csi_registrar "$@" 2>&1 | tee "$out/result.log" || rc=1
  kill "$kwok_pid" 2>/dev/null || true
  wait "$kwok_pid" 2>/dev/null || true
fi
# Removed once kwok is stopped: it recreates the leases of nodes deleted under
# it. Pods go with grace period 0: no kubelet runs them.
"$out/statusscale" -kubeconfig="$KUBECONFIG" -cleanup-only "$@" 2>&1 | tee -a "$out/result.log" || rc=1

bash kind/localnode/down.sh >>"$out/localnode.log" 2>&1 || rc=1
if [[ $was_up = 1 ]]; then bash kind/localnode/up.sh >>"$out/localnode.log" 2>&1 || rc=1; fi
exit $rc
