#!/usr/bin/env bash
# make test-pluginmanager: the in-process plugin-manager tests against each kubelet
# minor's code (go.mod, or k8s-<minor>.mod). Each minor is vetted and its test binary
# built one after the other (that part uses the CPU), then the binaries run side by side:
# they wait on the kubelet's reconciler rounds, not on the CPU (about 3 s of CPU in 220 s
# each, 2026-11-27). Each minor's output is printed whole once all ended, with its time.
#   [GO] [K8S_MINORS] [PM_TAGS] [PM_RUN] [PROOF_STEP_DIR] bash kind/pluginmanager/minors.sh
# PM_TAGS: more build tags, each with a leading comma; PM_RUN: a -run regular expression.
# PROOF_STEP_DIR (.ci/run sets it): each minor's go test -json also in PROOF_STEP_DIR/<minor>.json,
# and its output verbose (-test.v), for the proof map's check (docs/development.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
go=${GO:-go}
minors=${K8S_MINORS:-1.34 1.35 1.36 1.37 1.38}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failed=
built=()
for m in $minors; do
  mf=
  [[ ! -f k8s-$m.mod ]] || mf=-modfile=k8s-$m.mod
  if [[ -z $mf ]] && ! grep -q "k8s.io/kubernetes v$m\." go.mod; then
    echo "K8S_MINORS: no kubelet code for $m (kind/pluginmanager has go.mod and k8s-<minor>.mod; add one with ./gen-modfile.sh $m)" >&2
    exit 2
  fi
  tags=k8s_${m/./_}${PM_TAGS:-}
  # A minor whose kubelet code wants a newer Go than the local one names its toolchain
  # (k8s-1.38.mod: `toolchain go1.27.4`, the module proxy serves it): for its commands only.
  modf=go.mod
  [[ -z $mf ]] || modf=k8s-$m.mod
  tc=$(awk '$1 == "toolchain" {print $2}' "$modf")
  start=$SECONDS
  echo "== kubelet $m (${mf:-go.mod}${tc:+, $tc}): vet and build"
  if env ${tc:+GOTOOLCHAIN=$tc} $go vet $mf -tags "$tags" ./... &&
    env ${tc:+GOTOOLCHAIN=$tc} $go test $mf -tags "$tags" -c -o "$tmp/$m.test" .; then
    built+=("$m")
    echo "== kubelet $m: built in $((SECONDS - start)) s"
  else
    failed+=" $m"
  fi
done

run=()
[[ -z ${PM_RUN:-} ]] || run=(-test.run "$PM_RUN")
json=${PROOF_STEP_DIR:-}
if [[ -n $json ]]; then
  mkdir -p "$json"
  run+=(-test.v=test2json)
fi
pids=()
for m in "${built[@]}"; do
  (
    start=$SECONDS
    r=ok
    "$tmp/$m.test" -test.count=1 -test.timeout=20m "${run[@]}" >"$tmp/$m.log" 2>&1 || r=FAIL
    if [[ -n $json ]]; then
      # -test.v=test2json marks its framing lines with ^V: the JSON from them, the log without them.
      $go tool test2json -t -p "kind/pluginmanager@$m" <"$tmp/$m.log" >"$json/$m.json" || r=FAIL
      sed -e $'s/\026//' -e '/^=== NAME *$/d' <"$tmp/$m.log" >"$tmp/$m.txt" && mv "$tmp/$m.txt" "$tmp/$m.log"
    fi
    echo "$r in $((SECONDS - start)) s" >"$tmp/$m.result"
  ) &
  pids+=($!)
done
[[ ${#pids[@]} -eq 0 ]] || wait "${pids[@]}"
for m in "${built[@]}"; do
  echo "== kubelet $m: tests"
  cat "$tmp/$m.log"
  echo "== kubelet $m: $(cat "$tmp/$m.result")"
  grep -q '^ok' "$tmp/$m.result" || failed+=" $m"
done
if [[ -n $failed ]]; then
  echo "test-pluginmanager failed on kubelet code:$failed" >&2
  exit 1
fi
