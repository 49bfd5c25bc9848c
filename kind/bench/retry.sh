#!/usr/bin/env bash
# make bench-retry: figure 10 (a rejected registration and its repair, kind/e2e/
# retry_bench_test.go) on every Kubernetes version the local node supports, or on
# those given: for each, the node comes up with that version, the figure is
# measured, the node goes down. Then one table: version × figure.
# Logs and tables: bin/bench/retry/: <minor>.log the node's, <minor>.json the test's
# (go test -json), <minor>.tsv its figures (the table: kind/bench/report retry). The caller holds the local node's lock.
#   retry.sh [MINOR...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out=bin/bench/retry
if [[ $# -gt 0 ]]; then versions=("$@"); else
  mapfile -t versions < <(cd kind/localnode/k8sbuild && ls -d 1.*/ | tr -d / | sort -V)
fi
mkdir -p "$out"
rc=0
for v in "${versions[@]}"; do
  echo "=== Kubernetes $v (logs: $out/$v.log, $out/$v.json)"
  rm -f "$out/$v.tsv" "$out/$v.json"
  if K8S=$v bash kind/localnode/up.sh >"$out/$v.log" 2>&1; then
    K8S=$v BENCH_BINARY="$root/bin/csi-registrar" BENCH_RESULTS="$root/$out/$v.tsv" \
      go test -tags bench -count=1 -timeout 20m -run '^TestBenchKubeletRetry$' -json ./kind/e2e >"$out/$v.json" 2>&1 ||
      { rc=1; go run ./kind/bench/report failures -figures -n 5 "$out/$v.json"; }
  else
    rc=1; tail -5 "$out/$v.log"
  fi
  K8S=$v bash kind/localnode/down.sh >>"$out/$v.log" 2>&1 || rc=1
  cut -f1,2,4 "$out/$v.tsv" 2>/dev/null | column -t -s $'\t' || true
done
# version × figure (the figure's text without its "kubelet vX.Y.Z" part): kind/bench/report
go run ./kind/bench/report retry -dir "$out" "${versions[@]}"
exit $rc
