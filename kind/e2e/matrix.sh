#!/usr/bin/env bash
# make e2e-matrix: the end-to-end suite on every Kubernetes version the local node
# supports (kind/localnode/k8sbuild/<minor>/), one after the other: the node comes
# up with that version, the suite runs, the node goes down. Then one table,
# version × case → pass/fail and the case's duration, and one of every time the
# suite measured. Logs: bin/e2e/matrix/<minor>.log (make e2e's output), <minor>.json (its
# test2json events, what the tables are made from); tables: bin/e2e/matrix/table.md.
#   matrix.sh [MINOR...]        default: every supported version, oldest first
#   matrix.sh --table [MINOR...] only print the tables from the logs of an earlier run
# The caller holds the local node's lock for the whole run (make e2e-matrix does).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out=bin/e2e/matrix
table_only=false
if [[ "${1:-}" == --table ]]; then table_only=true; shift; fi
if [[ $# -gt 0 ]]; then
  versions=("$@")
else
  mapfile -t versions < <(cd kind/localnode/k8sbuild && ls -d 1.*/ | tr -d / | sort -V)
fi
mkdir -p "$out"

if ! $table_only; then
  t0=$(date +%s)
  for v in "${versions[@]}"; do
    s=$(date +%s)
    echo "=== [$(( s - t0 ))s] e2e on Kubernetes $v (log: $out/$v.log)"
    rc=0
    # -test.v=test2json (last, so it wins over make e2e's -test.v) frames the suite's
    # lines with ^V: go tool test2json makes the events of them, the log drops the ^V.
    make --no-print-directory e2e K8S="$v" E2E_ARGS=-test.v=test2json >"$out/$v.raw" 2>&1 || rc=$?
    echo "$rc" >"$out/$v.rc"
    go tool test2json -t -p kind/e2e <"$out/$v.raw" >"$out/$v.json" || true
    sed -e $'s/\026//' -e '/^=== NAME *$/d' <"$out/$v.raw" >"$out/$v.log" && rm -f "$out/$v.raw"
    go run ./kind/bench/report cases "$out/$v.json" || true
    echo "=== Kubernetes $v: exit $rc in $(( $(date +%s) - s ))s"
  done
fi

# Cases: the pass/fail/skip events of <minor>.json; times: the suite's closing
# "==== measured times (seconds) ====" block, its output events (kind/bench/report matrix).
go run ./kind/bench/report matrix -dir "$out" "${versions[@]}"

for v in "${versions[@]}"; do
  [[ "$(cat "$out/$v.rc" 2>/dev/null)" == 0 ]] || exit 1
done
