#!/usr/bin/env bash
# make bench: figures 1–9 of docs/performance.md as one table (kind/bench/report bench),
# also in $BENCH_DIR/results.md. Figures 1–6 and 9 are measured on processes
# (cmd/csi-registrar, tag bench), 7–8 on the local node's kubelet (kind/e2e,
# tag bench): the whole run then holds the node's lock (kind/nodelock.sh), so
# that no e2e suite competes for the cores while timings are taken; the node is
# brought up for 7–8, and down again if it was down. BENCH_KUBELET=0 skips them
# (and the lock). The Makefile passes BENCH_DIR, BENCH_KUBELET, IMAGE_TAR, GO;
# BENCH_RUNS, BENCH_IDLE, BENCH_INSTANCES and UPSTREAM_REGISTRAR reach the tests.
#   bench.sh      (from the repository's root, after make build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
: "${BENCH_DIR:=bin/bench}" "${BENCH_KUBELET:=1}" "${IMAGE_TAR:=bin/image.tar}" "${GO:=go}"
if [[ "$BENCH_KUBELET" == 1 && "${LOCALNODE_LOCKED:-}" != 1 ]]; then
  exec bash kind/nodelock.sh bash "$0" "$@"
fi
export BENCH_BINARY="$root/bin/csi-registrar" BENCH_RESULTS="$root/$BENCH_DIR/results.tsv"
report() { "$GO" run ./kind/bench/report "$@"; }

start=$(date +%s) rc=0
mkdir -p "$BENCH_DIR"
rm -f "$BENCH_DIR/results.tsv"
img=
if make --no-print-directory image >"$BENCH_DIR/image.log" 2>&1; then img="$root/$IMAGE_TAR"
else echo "make image failed (see $BENCH_DIR/image.log): figure 5c is n/a"; fi
# The tests' logs: go test -json (test2json events; kind/bench/report reads them).
echo "figures 1–6, 9: processes (log: $BENCH_DIR/process.json)"
BENCH_IMAGE=$img "$GO" test -tags bench -count=1 -timeout 60m -run '^TestBench' -json ./cmd/csi-registrar \
  >"$BENCH_DIR/process.json" 2>&1 || { rc=1; report failures "$BENCH_DIR/process.json"; }
if [[ "$BENCH_KUBELET" == 1 ]]; then
  echo "figures 7–8: the local node's kubelet (log: $BENCH_DIR/kubelet.json)"
  was_up=0
  if bash kind/localnode/status.sh; then was_up=1; fi
  bash kind/localnode/up.sh >"$BENCH_DIR/localnode.log" 2>&1 || { rc=1; tail -20 "$BENCH_DIR/localnode.log"; }
  "$GO" test -tags bench -count=1 -timeout 60m -run '^TestBenchKubelet' -json ./kind/e2e >"$BENCH_DIR/kubelet.json" 2>&1 ||
    { rc=1; report failures "$BENCH_DIR/kubelet.json"; }
  if [[ $was_up == 0 ]]; then bash kind/localnode/down.sh >>"$BENCH_DIR/localnode.log" 2>&1 || rc=1; fi
fi
report bench -dir "$BENCH_DIR"
echo "make bench: $(( $(date +%s) - start )) s on $(nproc) cores ($(uname -r)); upstream: ${UPSTREAM_REGISTRAR:-not measured}"
exit $rc
