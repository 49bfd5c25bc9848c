#!/usr/bin/env bash
# make flake-check: make e2e's tests on the local node, and verify's R2 and R5 on manifests/, FLAKE_RUNS times
# each (10 by default, about an hour warm), the node kept up between runs of one kind; then the failure rate per
# test, and per run kind its non-zero exits (internal/proofmap/cmd/flaketally). Each run's output and exit code
# (<kind>-<n>.log, .rc) stay in bin/flake/.
#   FLAKE_RUNS=10 [FLAKE_KINDS="e2e verify"] bash kind/e2e/flake-check.sh      (from the Makefile: make flake-check)
# FLAKE_KINDS: which kinds of run (both by default; one, to repeat only that part).
# FLAKE_MIN_FREE_GIB: the free space (GiB, 10 by default) it wants before each run on every filesystem the runs
# write to (below). It refuses to start with less, and stops the runs when a run leaves less.
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${FLAKE_RUNS:-10}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "FLAKE_RUNS=$runs: want a number of runs, 1 or more" >&2; exit 2; }
kinds=" ${FLAKE_KINDS:-e2e verify} "
for k in $kinds; do
  [[ $k == e2e || $k == verify ]] || { echo "FLAKE_KINDS=${FLAKE_KINDS}: $k is not a kind of run: want e2e, verify or both" >&2; exit 2; }
done
min_gib=${FLAKE_MIN_FREE_GIB:-10}
[[ $min_gib =~ ^[0-9]+$ ]] || { echo "FLAKE_MIN_FREE_GIB=$min_gib: want a whole number of GiB, e.g. 10" >&2; exit 2; }
# What the runs write to: the local node's images, containerd and etcd (its cache root), the kubelet's root dir,
# the Go build cache, and the runs' logs here. On a full disk the kubelet reports DiskPressure, refuses pods and
# removes images, which cannot be pulled again here: runs fail for the machine, not for a test.
node_root=$(bash -c 'source kind/localnode/env.sh >/dev/null 2>&1; echo "$LOCALNODE_ROOT"')
gocache=$(go env GOCACHE)
# free: each filesystem the runs write to, once, and its free KiB (a path not made yet: its nearest existing
# parent's). room: their free space, for each run's line; short: those with less than min_gib free (empty: none).
free() {
  local p paths=()
  for p in "$node_root" /var/lib/kubelet "$gocache" .; do
    until [[ -e $p ]]; do p=$(dirname "$p"); done
    paths+=("$p")
  done
  df -Pk -- "${paths[@]}" | awk 'NR > 1 && !seen[$6]++ { print $6, $4 }'
}
room() { free | awk '{ printf "%s %.1f GiB free; ", $1, $2 / 1048576 }'; }
short() { free | awk -v min="$min_gib" '$2 < min * 1048576 { printf "%s has %.1f GiB free; ", $1, $2 / 1048576 }'; }
fix="a full disk fails runs for the machine, not for a test (DiskPressure): free space (old clones and their caches,
  go clean -cache, make local-purge) or, if you know the runs fit, lower FLAKE_MIN_FREE_GIB"
want="want at least FLAKE_MIN_FREE_GIB=$min_gib GiB on each"
lack=$(short)
if [[ -n $lack ]]; then
  echo "flake-check: not started: $lack$want; $fix" >&2
  exit 2
fi
# enough_room: true when every filesystem has min_gib free; else it says so, and the runs stop.
stopped=
enough_room() {
  local lack
  lack=$(short)
  [[ -z $lack ]] && return 0
  stopped="before $1: $lack$want"
  echo "flake-check: runs stopped $stopped; $fix" >&2
  return 1
}
out=bin/flake
rm -rf "$out" && mkdir -p "$out"
t0=$(date +%s)
for i in $(seq 1 "$runs"); do
  [[ $kinds == *" e2e "* ]] && enough_room "make e2e's run $i" || break
  s=$(date +%s)
  make --no-print-directory e2e E2E_KEEP=1 >"$out/e2e-$i.log" 2>&1
  echo $? >"$out/e2e-$i.rc"
  echo "flake-check: make e2e, run $i of $runs: exit $(<"$out/e2e-$i.rc"), $(( $(date +%s) - s )) s; $(room)"
  go tool test2json -p e2e <"$out/e2e-$i.log" >"$out/e2e-$i.json"
done
# The suite kept its deployment of manifests/ (E2E_KEEP=1), and verify refuses a cluster where the driver under
# test is installed: a fresh node for verify's runs, and for whatever uses the node next. local-down keeps the
# cluster's state (etcd, the kubelet's directories), so the node is purged.
if [[ $kinds == *" e2e "* ]]; then
  make --no-print-directory local-purge >"$out/purge-e2e.log" 2>&1 || echo "flake-check: the local node was not purged: see $out/purge-e2e.log" >&2
fi
for i in $(seq 1 "$runs"); do
  [[ $kinds == *" verify "* && -z $stopped ]] && enough_room "verify's run $i" || break
  s=$(date +%s)
  make --no-print-directory e2e-driver E2E_KEEP=1 DRIVER=manifests \
    VERIFY_ARGS='--case R2_volumes_across_instances --case R5_newer_driver_fails' >"$out/verify-$i.log" 2>&1
  echo $? >"$out/verify-$i.rc"
  echo "flake-check: R2 and R5 on manifests/, run $i of $runs: exit $(<"$out/verify-$i.rc"), $(( $(date +%s) - s )) s; $(room)"
done
make --no-print-directory local-down >"$out/down.log" 2>&1 || echo "flake-check: the local node did not go down: see $out/down.log" >&2
echo "flake-check: $runs runs each in $(( $(date +%s) - t0 )) s"
go run ./internal/proofmap/cmd/flaketally "$out"
rc=$?
# Runs stopped for room count neither way: the tally above holds only those that ran, and the check fails.
[[ -z $stopped ]] || { echo "flake-check: incomplete: runs stopped $stopped" >&2; exit 2; }
exit $rc
