#!/usr/bin/env bash
# make e2e-matrix: the end-to-end suite on every Kubernetes version the local node
# supports (kind/localnode/k8sbuild/<minor>/), one after the other: the node comes
# up with that version, the suite runs, the node goes down. Then one table,
# version × case → pass/fail and the case's duration, and one of every time the
# suite measured. Logs: bin/e2e/matrix/<minor>.log; tables: bin/e2e/matrix/table.md.
#   e2e-matrix.sh [MINOR...]        default: every supported version, oldest first
#   e2e-matrix.sh --table [MINOR...] only print the tables from the logs of an earlier run
# The caller holds the local node's lock for the whole run (make e2e-matrix does).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
    make --no-print-directory e2e K8S="$v" >"$out/$v.log" 2>&1 || rc=$?
    echo "$rc" >"$out/$v.rc"
    grep -E -- '^\s*--- (PASS|FAIL|SKIP): ' "$out/$v.log" | sed 's/^\s*/    /' || true
    echo "=== Kubernetes $v: exit $rc in $(( $(date +%s) - s ))s"
  done
fi

# Cases: "--- PASS: TestE2E/1_deployed (12.34s)" lines of go test -v.
# Times: the suite's closing "==== measured times (seconds) ====" block.
awk -v out="$out" '
  function cell(s) { return s == "" ? "-" : s }
  FNR == 1 {
    v = FILENAME; sub(".*/", "", v); sub("[.]log$", "", v); vs[++nv] = v; inblock = 0
    rcf = out "/" v ".rc"; rc[v] = "?"; if ((getline line < rcf) > 0) rc[v] = line; close(rcf)
  }
  /^ *--- (PASS|FAIL|SKIP): / {
    name = $3; res = $2; sub(":", "", res); d = $4; gsub(/[()]/, "", d)
    if (!(name in seen)) { seen[name] = 1; cases[++nc] = name }
    r[name, v] = res " " d
  }
  /^==== measured times \(seconds\) ====/ { inblock = 1; next }
  inblock && NF == 0 { inblock = 0 }
  inblock && NF >= 3 {
    scope = $1; secs = $2; what = $0; sub(/^[^ ]+ +[^ ]+ +/, "", what)
    k = scope " | " what
    if (!(k in tseen)) { tseen[k] = 1; ts[++nt] = k }
    tv[k, v] = (tv[k, v] == "" ? "" : tv[k, v] ", ") secs
  }
  END {
    printf "| case |"; for (i = 1; i <= nv; i++) printf " %s |", vs[i]; print ""
    printf "|---|"; for (i = 1; i <= nv; i++) printf "---|"; print ""
    for (c = 1; c <= nc; c++) {
      printf "| %s |", cases[c]; for (i = 1; i <= nv; i++) printf " %s |", cell(r[cases[c], vs[i]]); print ""
    }
    printf "| make e2e exit |"; for (i = 1; i <= nv; i++) printf " %s |", rc[vs[i]]; print ""
    print ""
    printf "| case | measured (s) |"; for (i = 1; i <= nv; i++) printf " %s |", vs[i]; print ""
    printf "|---|---|"; for (i = 1; i <= nv; i++) printf "---|"; print ""
    for (j = 1; j <= nt; j++) {
      split(ts[j], kk, " [|] ")
      printf "| %s | %s |", kk[1], kk[2]; for (i = 1; i <= nv; i++) printf " %s |", cell(tv[ts[j], vs[i]]); print ""
    }
  }
' $(for v in "${versions[@]}"; do [[ -f "$out/$v.log" ]] && echo "$out/$v.log"; done) | tee "$out/table.md"

for v in "${versions[@]}"; do
  [[ "$(cat "$out/$v.rc" 2>/dev/null)" == 0 ]] || exit 1
done
