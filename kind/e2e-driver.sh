#!/usr/bin/env bash
# make e2e-driver: the driver suite on each of DRIVERS (comma-separated
# manifests) with csi-registrar as the registrar and, with COMPARE=<image
# archive of another registrar>, again with that one; then one table:
# driver and case × registrar (verdict, restarts, times). The cluster stays up
# between the runs and is torn down after the last (unless E2E_KEEP=1).
#   E2E_TEST DRIVERS [COMPARE] bash kind/e2e-driver.sh <one run's command and flags...>
# The command is the suite as `make e2e` (local node) or kind/e2e-kind.sh runs it.
set -uo pipefail
: "${E2E_TEST:?}" "${DRIVERS:?}"
out=bin/e2e/driver-results
mkdir -p "$out"
rm -f "$out"/*.json
keep_last=${E2E_KEEP:-}
IFS=, read -ra drivers <<<"$DRIVERS"
registrars=(csi-registrar)
[[ -z "${COMPARE:-}" ]] || registrars+=(compare)
total=$(( ${#drivers[@]} * ${#registrars[@]} )) i=0 rc=0 files=()
for reg in "${registrars[@]}"; do
  for drv in "${drivers[@]}"; do
    i=$((i + 1))
    f="$out/$i-$reg-$(basename "$drv").json"
    flags=(-driver="$drv" -driver-results="$f")
    [[ $reg == csi-registrar ]] || flags+=(-registrar-archive="$COMPARE")
    keep=1
    [[ $i -lt $total ]] || keep=$keep_last
    s=$(date +%s)
    echo "==== e2e-driver $i/$total: $drv with $reg"
    E2E_KEEP=$keep "$@" "${flags[@]}" || { [[ $rc -ne 0 ]] || rc=1; }
    echo "==== e2e-driver $i/$total: $drv with $reg: $(( $(date +%s) - s )) s"
    [[ ! -f $f ]] || files+=("$f")
  done
done
echo "==== registration cases (verdict: the kubelet's and the API's; restarts: container restarts during the case; times from the fault, s)"
if [[ ${#files[@]} -gt 0 ]]; then
  "$E2E_TEST" -driver-table="$(IFS=,; echo "${files[*]}")" || { [[ $rc -ne 0 ]] || rc=1; }
fi
exit "$rc"
