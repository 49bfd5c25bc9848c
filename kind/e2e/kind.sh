#!/usr/bin/env bash
# make e2e-kind: bring kind/cluster/cluster.yaml's cluster up (kind/cluster/cluster.sh), run the
# compiled suite on it, tear it all down and check the host (unless E2E_KEEP=1).
#   E2E_TEST E2E_IMAGE_ARCHIVE [E2E_TIMEOUT] [E2E_KEEP] bash kind/e2e/kind.sh [test flags]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${E2E_TEST:?}" "${E2E_IMAGE_ARCHIVE:?}"
rc=0
bash "$here/../cluster/cluster.sh" up || rc=$?
if [[ $rc -eq 0 ]]; then
  eval "$(bash "$here/../cluster/cluster.sh" env)"
  # E2E_KEEP=1 for the suite: cluster.sh down below removes the cluster and all the rest.
  E2E_KEEP=1 E2E_PROVIDER=kind "$E2E_TEST" -test.v -test.count=1 -test.timeout="${E2E_TIMEOUT:-40m}" "$@" || rc=$?
fi
if [[ -z "${E2E_KEEP:-}" ]]; then bash "$here/../cluster/cluster.sh" down || { [[ $rc -ne 0 ]] || rc=1; }; fi
exit "$rc"
