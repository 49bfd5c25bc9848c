#!/usr/bin/env bash
# make flake-check: make e2e's tests on the local node, and verify's R2 and R5 on manifests/, FLAKE_RUNS times
# each (10 by default, about an hour warm), the node kept up between runs of one kind; then the failure rate per
# test, and per run kind its non-zero exits (internal/proofmap/cmd/flaketally). Each run's output and exit code
# (<kind>-<n>.log, .rc) stay in bin/flake/.
#   FLAKE_RUNS=10 [FLAKE_KINDS="e2e verify"] bash kind/e2e/flake-check.sh      (from the Makefile: make flake-check)
# FLAKE_KINDS: which kinds of run (both by default; one, to repeat only that part).
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${FLAKE_RUNS:-10}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "FLAKE_RUNS=$runs: want a number of runs, 1 or more" >&2; exit 2; }
kinds=" ${FLAKE_KINDS:-e2e verify} "
for k in $kinds; do
  [[ $k == e2e || $k == verify ]] || { echo "FLAKE_KINDS=${FLAKE_KINDS}: $k is not a kind of run: want e2e, verify or both" >&2; exit 2; }
done
out=bin/flake
rm -rf "$out" && mkdir -p "$out"
t0=$(date +%s)
for i in $(seq 1 "$runs"); do
  [[ $kinds == *" e2e "* ]] || break
  s=$(date +%s)
  make --no-print-directory e2e E2E_KEEP=1 >"$out/e2e-$i.log" 2>&1
  echo $? >"$out/e2e-$i.rc"
  echo "flake-check: make e2e, run $i of $runs: exit $(<"$out/e2e-$i.rc"), $(( $(date +%s) - s )) s"
  go tool test2json -p e2e <"$out/e2e-$i.log" >"$out/e2e-$i.json"
done
# The suite kept its deployment of manifests/ (E2E_KEEP=1), and verify refuses a cluster where the driver under
# test is installed: a fresh node for verify's runs, and for whatever uses the node next. local-down keeps the
# cluster's state (etcd, the kubelet's directories), so the node is purged.
if [[ $kinds == *" e2e "* ]]; then
  make --no-print-directory local-purge >"$out/purge-e2e.log" 2>&1 || echo "flake-check: the local node was not purged: see $out/purge-e2e.log" >&2
fi
for i in $(seq 1 "$runs"); do
  [[ $kinds == *" verify "* ]] || break
  s=$(date +%s)
  make --no-print-directory e2e-driver E2E_KEEP=1 DRIVER=manifests \
    VERIFY_ARGS='--case R2_volumes_across_instances --case R5_newer_driver_fails' >"$out/verify-$i.log" 2>&1
  echo $? >"$out/verify-$i.rc"
  echo "flake-check: R2 and R5 on manifests/, run $i of $runs: exit $(<"$out/verify-$i.rc"), $(( $(date +%s) - s )) s"
done
make --no-print-directory local-down >"$out/down.log" 2>&1 || echo "flake-check: the local node did not go down: see $out/down.log" >&2
echo "flake-check: $runs runs each in $(( $(date +%s) - t0 )) s"
go run ./internal/proofmap/cmd/flaketally "$out"
