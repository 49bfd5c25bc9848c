#!/usr/bin/env bash
# make bench-rollout: the rollout figures of docs/performance.md "Rollouts side by
# side" — per node, how long the driver was unregistered during a rollout and how
# many mounts of inline-volume pods started every 0.3 s failed (verify's case
# 6_rollout) — then ten rollouts with faults (case 8_rollouts_with_faults). Each
# step is a `make e2e-driver` (the local node, or kind with E2E_PROVIDER=kind; each
# takes the node lock itself). UPSTREAM_REGISTRAR=<image archive of
# node-driver-registrar> (built locally from its source by whoever runs this; never
# in CI) adds its runs, side by side with csi-registrar's on the same manifests.
# Tables in $BENCH_DIR (default bin/bench/rollout). ROLLOUTS (10) sets case 8's count.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
dir=${BENCH_DIR:-bin/bench/rollout}
rollouts=${ROLLOUTS:-10}
mkdir -p "$dir"
if [[ -n "${UPSTREAM_REGISTRAR:-}" && ! -r "$UPSTREAM_REGISTRAR" ]]; then
  echo "UPSTREAM_REGISTRAR=$UPSTREAM_REGISTRAR: cannot read it (want an image archive of node-driver-registrar, e.g. from buildah push docker-archive:FILE)" >&2
  exit 2
fi
rc=0
step() { # step NAME make-args...: one verify run, its output in $dir/NAME.log
  local name=$1 s
  shift
  s=$(date +%s)
  echo "== $name: make e2e-driver $*"
  make --no-print-directory e2e-driver "$@" >"$dir/$name.log" 2>&1 || rc=1
  awk '/^==== registration cases/{p=1} /^verify [0-9:.]+: removed /{p=0} p' "$dir/$name.log" | tee "$dir/$name.table"
  echo "== $name: $(( $(date +%s) - s )) s (log: $dir/$name.log)"
}
start=$(date +%s)
# 1. With the mode (maxSurge 1): the reference driver, and a third-party layout's opt-in.
step mode DRIVER=manifests,manifests/examples/upstream-style-rolling-update \
  VERIFY_ARGS="--case 6_rollout"
# 2. Without it: the reference driver without the mode (maxUnavailable 1).
step no-mode DRIVER=manifests/overlays/without-rolling-update VERIFY_ARGS="--case 6_rollout"
# 3. A third-party layout that publishes volumes, as written (maxUnavailable 1), then with
#    maxSurge 1; node-driver-registrar beside (its probes are upstream's: manifests/ is
#    csi-registrar's and does not run with it).
step upstream-layout DRIVER=kind/bench/rollout/upstream-style-mounts,kind/bench/rollout/upstream-style-surge1 \
  VERIFY_ARGS="--case 6_rollout" ${UPSTREAM_REGISTRAR:+COMPARE="$UPSTREAM_REGISTRAR"}
# 4. Rollouts with faults, with the mode.
step faults DRIVER=manifests \
  VERIFY_ARGS="--case 8_rollouts_with_faults --rollouts $rollouts"
grep -h "8_rollouts_with_faults: \(node\|faults\)" "$dir/faults.log" | sed 's/^ *//' | cut -c1-400
echo "make bench-rollout: $(( $(date +%s) - start )) s on $(nproc) cores; upstream: ${UPSTREAM_REGISTRAR:-not measured}"
exit $rc
