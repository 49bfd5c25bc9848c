#!/usr/bin/env bash
# make e2e-new-driver: what `make new-driver` writes works as written. Two projects
# are generated under different names into a temporary directory, copied to another
# one, and the originals removed; in a mount namespace where this checkout's path is
# an empty tmpfs (as on a machine without it) the first runs go mod tidy and its make
# build test, the second go mod tidy and make build. Then their own targets run, with
# no file of them edited: make image for both (docker if an engine answers, else
# buildah), then this checkout's make e2e-driver on the first's manifests/ (the
# sidecar variant, with the csi-registrar image built here) with every case of verify
# named, the mode-readiness cases R1-R5 included, each of which must pass (not "not
# judged"); on the same node, once verify passed, kind/driver/two-drivers.sh installs
# both projects side by side, checks both register and `kubectl csi-registrar status`
# lists both, uninstalls the second and checks the first stays registered. The local
# node, under the node lock for that step only. The directory is removed at the end,
# pass or fail. Each step is timed; the times are printed at the end.
#   [GO] [NEW_DRIVER_MODULE] [NEW_DRIVER_NAME] [NEW_DRIVER2_MODULE] [NEW_DRIVER2_NAME] \
#   [VERIFY_ARGS] bash kind/driver/new-driver.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
go=${GO:-go}
module=${NEW_DRIVER_MODULE:-example.com/acme-csi}
driver=${NEW_DRIVER_NAME:-acme.csi.example.com}
module2=${NEW_DRIVER2_MODULE:-example.org/beta-storage}
driver2=${NEW_DRIVER2_NAME:-beta.storage.example.org}
if [[ "$(basename "$module")" == "$(basename "$module2")" || "$driver" == "$driver2" ]]; then
  echo "e2e-new-driver: NEW_DRIVER_MODULE=$module NEW_DRIVER_NAME=$driver and NEW_DRIVER2_MODULE=$module2 NEW_DRIVER2_NAME=$driver2: side by side, the modules' last elements (the namespaces) and the driver names must differ" >&2
  exit 2
fi
# The generated project's make must not see this make's command-line variables
# (MAKEFLAGS passes them on: IMAGE=... would rename its image).
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

tmp=$(mktemp -d "${TMPDIR:-/tmp}/e2e-new-driver.XXXXXX")
proj=$tmp/$(basename "$module")
t0=$(date +%s)
times=()
summary() {
  local rc=$?
  rm -rf "$tmp"
  echo "==== e2e-new-driver: step times ($module, $driver; $module2, $driver2)"
  printf '%s\n' "${times[@]}"
  echo "==== e2e-new-driver: total $(( $(date +%s) - t0 )) s; $tmp removed$([[ $rc -eq 0 ]] || echo "; FAILED, exit $rc")"
}
trap summary EXIT

# step NAME CMD...: a timed step; the first failure ends the run.
step() {
  local name=$1 s rc=0
  shift
  s=$(date +%s)
  echo "==== e2e-new-driver: $name"
  "$@" || rc=$?
  times+=("$(printf '%6s s  %s%s' "$(( $(date +%s) - s ))" "$name" "$([[ $rc -eq 0 ]] || echo "  (FAILED, exit $rc)")")")
  return "$rc"
}

# Before first use: buildah when no Docker engine answers (the generated
# Makefile's image target would install it too, but only as root with apt).
docker info >/dev/null 2>&1 || command -v buildah >/dev/null || bash kind/localnode/install-deps.sh buildah

step "make new-driver ($module)" make --no-print-directory new-driver GO="$go" MODULE="$module" DRIVER="$driver" DIR="$tmp/generated"
step "make new-driver ($module2)" make --no-print-directory new-driver GO="$go" MODULE="$module2" DRIVER="$driver2" DIR="$tmp/generated2"
(cd "$tmp/generated" && find . -type f | sort | sed 's|^\./|  |')

# The copies outside the checkout, which they must not need: no file names the
# checkout's path, and in a mount namespace that hides the checkout (a tmpfs
# over its path; the Go toolchain, module and build caches stay visible: they
# are not in it) go mod tidy, make build and make test pass.
checkout=$(pwd -P)
case "$(cd "$tmp" && pwd -P)/" in "$checkout"/*)
  echo "e2e-new-driver: TMPDIR=$TMPDIR is inside the checkout $checkout, which the copy's steps hide: use another" >&2; exit 2 ;;
esac
proj=$tmp/elsewhere/$(basename "$module")
proj2=$tmp/elsewhere/$(basename "$module2")
copy_out() {
  local from to
  for from in generated generated2; do
    to=$proj
    [[ $from == generated ]] || to=$proj2
    mkdir -p "$(dirname "$to")" && cp -a "$tmp/$from" "$to" && rm -rf "${tmp:?}/$from"
    if grep -rlF -- "$checkout" "$to"; then
      echo "e2e-new-driver: the files above name the checkout $checkout" >&2
      return 1
    fi
  done
}
# hidden DIR CMD...: CMD in DIR with the checkout hidden.
hidden() {
  # unshare -m: a private mount namespace (root, or unshare -rm elsewhere).
  local u=(unshare -m)
  [[ $(id -u) -eq 0 ]] || u=(unshare -rm)
  "${u[@]}" bash -euo pipefail -c '
    mount -t tmpfs -o size=1m,mode=0555 hidden "$1"
    [[ -z "$(ls -A "$1")" ]] || { echo "the checkout $1 is still visible" >&2; exit 1; }
    cd "$2"; shift 2
    export GOWORK=off
    "$@"' hidden "$checkout" "$@"
}
step "copy both outside the checkout" copy_out
step "go mod tidy ($(basename "$module"), checkout hidden)" hidden "$proj" "$go" mod tidy
step "make build ($(basename "$module"), checkout hidden)" hidden "$proj" nice -n 10 make --no-print-directory build GO="$go"
step "make test ($(basename "$module"), checkout hidden)" hidden "$proj" nice -n 10 make --no-print-directory test GO="$go"
step "go mod tidy, make build ($(basename "$module2"), checkout hidden)" \
  hidden "$proj2" bash -c '"$1" mod tidy && nice -n 10 make --no-print-directory build GO="$1"' _ "$go"
# buildah's storage in the temporary directory: removed with it.
step "make image ($(basename "$module"))" nice -n 10 make -C "$proj" --no-print-directory image GO="$go" BUILDAH_ROOT="$tmp/buildah"
step "make image ($(basename "$module2"))" nice -n 10 make -C "$proj2" --no-print-directory image GO="$go" BUILDAH_ROOT="$tmp/buildah"

# verify on the first project with every case named: 2-6 and the mode-readiness
# cases R1-R5 (which verify runs unnamed only when it sees the mode in the
# manifests: named, a project that lost the mode fails here). VERIFY_ARGS as for
# make e2e-driver (e.g. --registrar-logs=blocked). Then, on the same node, the
# two projects side by side (AFTER_VERIFY). The step includes the csi-registrar
# image and plugin builds and the wait for the node's lock: the time on the node
# is its own line.
cases="--case 2_registrar_pod_deleted --case 3_kubelet_restarted --case 4_registration_socket_removed"
cases+=" --case 5_driver_container_killed --case 6_rollout"
cases+=" --case R1_mode_manifests --case R2_volumes_across_instances --case R3_own_csi_socket --case R4_serves_after_sigterm --case R5_newer_driver_fails"
e2e_driver() {
  AFTER_VERIFY="bash '$checkout/kind/driver/two-drivers.sh' '$driver' '$proj' '$driver2' '$proj2'" \
    make --no-print-directory e2e-driver GO="$go" DRIVER="$proj/manifests" \
    DRIVER_IMAGES="$proj/bin/image.tar,$proj2/bin/image.tar" \
    VERIFY_ARGS="$cases ${VERIFY_ARGS:-}" 2>&1 | tee "$tmp/e2e-driver.log"
}
# The readiness cases passed, each: verify exits 0 on "not judged" too.
readiness_passed() {
  local c bad=0
  for c in R1_mode_manifests R2_volumes_across_instances R3_own_csi_socket R4_serves_after_sigterm R5_newer_driver_fails; do
    grep -qxF "manifests $c: pass" "$tmp/e2e-driver.log" || { echo "e2e-new-driver: $c did not pass on the generated manifests" >&2; bad=1; }
  done
  return "$bad"
}
rc=0
step "make e2e-driver ($(basename "$module")/manifests/, then both side by side)" e2e_driver || rc=$?
[[ $rc -ne 0 ]] || step "R1-R5 passed (verify's readiness summary)" readiness_passed || rc=$?
on_node=$(sed -n 's/^==== e2e-driver: \([0-9]*\) s$/\1/p' "$tmp/e2e-driver.log" | tail -1)
up=$(sed -n 's/^==== e2e-driver: [a-z]* up, images loaded: \([0-9]*\) s$/\1/p' "$tmp/e2e-driver.log" | tail -1)
two=$(sed -n 's/^==== e2e-driver: after verify .*: \([0-9]*\) s$/\1/p' "$tmp/e2e-driver.log" | tail -1)
rolled=$(sed -n 's/.*6_rollout: measured: template change -> rolled out (every pod new and Ready): \(.*\)$/\1/p' "$tmp/e2e-driver.log" | tail -1)
unreg=$(sed -n 's/.*6_rollout: node [^:]*: CSINode entry absent: \(.*\)$/\1/p' "$tmp/e2e-driver.log" | tail -1)
mounts=$(sed -n 's/.*6_rollout: node [^:]*: \([0-9]* inline-volume pods started.*\)$/\1/p' "$tmp/e2e-driver.log" | tail -1)
[[ -z "$on_node" ]] || times+=("$(printf '%6s s    of which on the node (lock held: up and images loaded %s s, verify, then two drivers %s s)' "$on_node" "${up:-?}" "${two:-?}")")
[[ -z "$rolled" ]] || times+=("$(printf '%8s rollout of the generated driver (6_rollout): %s; CSINode entry absent: %s; %s' "" "$rolled" "${unreg:-?}" "${mounts:-?}")")
exit "$rc"
