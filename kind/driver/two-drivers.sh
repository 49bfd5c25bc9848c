#!/usr/bin/env bash
# Two projects of `make new-driver` side by side on one node (make e2e-new-driver,
# after verify, on the cluster verify.sh brought up; their images loaded):
# both installed as written (kubectl apply -k manifests/), both registered (the
# Node's annotation and its CSINode entry), `kubectl csi-registrar status` lists
# both and exits 0; one uninstalled (kubectl delete -k), the other stays
# registered and status still says so; then the other is uninstalled too.
# Each phase is timed. Whatever it installed is removed at the end, pass or fail.
#   KUBECONFIG KUBECTL PLUGIN bash kind/driver/two-drivers.sh DRIVER_A PROJECT_A DRIVER_B PROJECT_B
set -euo pipefail
: "${KUBECONFIG:?}" "${KUBECTL:?}" "${PLUGIN:?}"
[[ $# -eq 4 ]] || { echo "usage: two-drivers.sh DRIVER_A PROJECT_A DRIVER_B PROJECT_B" >&2; exit 2; }
names=("$1" "$3")
projects=("$2" "$4")
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "==== two drivers +$(elapsed) s: $*"; }

installed=()
cleanup() {
  local rc=$?
  for p in "${installed[@]}"; do k delete -k "$p/manifests" --ignore-not-found --wait=true --timeout=2m >/dev/null 2>&1 || true; done
  [[ $rc -eq 0 ]] || echo "==== two drivers: FAILED (exit $rc) after $(elapsed) s" >&2
}
trap cleanup EXIT

# registered NAME: the kubelet has NAME registered on the node: its key in the
# Node's annotation and its CSINode entry.
registered() {
  local ann drivers
  ann=$(k get node "$node" -o jsonpath='{.metadata.annotations.csi\.volume\.kubernetes\.io/nodeid}')
  drivers=$(k get csinode "$node" -o jsonpath='{range .spec.drivers[*]}{.name}{"\n"}{end}' 2>/dev/null || true)
  [[ -n "$ann" ]] || ann='{}'
  jq -e --arg n "$1" 'has($n)' <<<"$ann" >/dev/null && grep -qxF "$1" <<<"$drivers"
}
# await WHAT SECONDS CMD...: CMD passes within SECONDS.
await() {
  local what=$1 limit=$2 s
  shift 2
  s=$(date +%s)
  until "$@"; do
    if (( $(date +%s) - s >= limit )); then
      echo "two drivers: not within ${limit} s: $what" >&2
      k get node "$node" -o jsonpath='{.metadata.annotations.csi\.volume\.kubernetes\.io/nodeid}{"\n"}' >&2 || true
      k get csinode "$node" -o yaml >&2 || true
      k get pods -A -o wide >&2 || true
      return 1
    fi
    sleep 0.5
  done
}
not() { ! "$@"; }
# status [DRIVER]: kubectl csi-registrar status, printed; its exit code.
status() {
  local rc=0
  "$PLUGIN" status --kubeconfig "$KUBECONFIG" "$@" || rc=$?
  return "$rc"
}

for i in 0 1; do
  say "install ${names[$i]} (kubectl apply -k ${projects[$i]}/manifests)"
  installed+=("${projects[$i]}")
  k apply -k "${projects[$i]}/manifests"
done
for i in 0 1; do
  await "${names[$i]} registered on $node" 120 registered "${names[$i]}"
  say "${names[$i]} registered on $node (annotation and CSINode entry)"
done
out=$(status) || { echo "$out"; echo "two drivers: status exits not 0 with both installed" >&2; exit 1; }
echo "$out"
for n in "${names[@]}"; do
  grep -qF "$n" <<<"$out" || { echo "two drivers: status does not list $n" >&2; exit 1; }
done
say "status lists both, exit 0"

say "uninstall ${names[1]} (kubectl delete -k ${projects[1]}/manifests)"
k delete -k "${projects[1]}/manifests" --wait=true --timeout=2m
installed=("${projects[0]}")
await "${names[1]} unregistered on $node" 60 not registered "${names[1]}"
say "${names[1]} unregistered"
registered "${names[0]}" || { echo "two drivers: ${names[0]} is no longer registered on $node once ${names[1]} is uninstalled" >&2; exit 1; }
out=$(status "${names[0]}") || { echo "$out"; echo "two drivers: status ${names[0]} exits not 0 once ${names[1]} is uninstalled" >&2; exit 1; }
echo "$out"
out=$(status) || { echo "$out"; echo "two drivers: status exits not 0 once ${names[1]} is uninstalled" >&2; exit 1; }
echo "$out"
grep -qF "${names[0]}" <<<"$out" || { echo "two drivers: status no longer lists ${names[0]}" >&2; exit 1; }
! grep -qF "${names[1]}" <<<"$out" || { echo "two drivers: status still lists ${names[1]}, uninstalled" >&2; exit 1; }
say "${names[0]} still registered; status says so, exit 0"

say "uninstall ${names[0]}"
k delete -k "${projects[0]}/manifests" --wait=true --timeout=2m
installed=()
await "${names[0]} unregistered on $node" 60 not registered "${names[0]}"
say "both uninstalled"
