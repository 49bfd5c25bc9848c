#!/usr/bin/env bash
# make e2e-new-driver: what `make new-driver` writes works as written. A project is
# generated into a temporary directory, copied to another one, and the original
# removed; in a mount namespace where this checkout's path is an empty tmpfs (as on a
# machine without it) the copy runs go mod tidy and its make build test. Then its own
# targets run, with no file of it edited: make image (docker if an engine answers,
# else buildah), then this checkout's make e2e-driver on its manifests/ (the sidecar
# variant, with the csi-registrar image built here) and its image archive: the
# local node, under the node lock for that step only. The directory is removed at
# the end, pass or fail. Each step is timed; the times are printed at the end.
#   [GO] [NEW_DRIVER_MODULE] [NEW_DRIVER_NAME] [VERIFY_ARGS] bash kind/e2e-new-driver.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go=${GO:-go}
module=${NEW_DRIVER_MODULE:-example.com/ci-csi}
driver=${NEW_DRIVER_NAME:-ci.csi.example.com}
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
  echo "==== e2e-new-driver: step times ($module, $driver)"
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

step "make new-driver" make --no-print-directory new-driver GO="$go" MODULE="$module" DRIVER="$driver" DIR="$tmp/generated"
(cd "$tmp/generated" && find . -type f | sort | sed 's|^\./|  |')

# The copy outside the checkout, which it must not need: no file names the
# checkout's path, and in a mount namespace that hides the checkout (a tmpfs
# over its path; the Go toolchain, module and build caches stay visible: they
# are not in it) go mod tidy, make build and make test pass.
checkout=$(pwd -P)
case "$(cd "$tmp" && pwd -P)/" in "$checkout"/*)
  echo "e2e-new-driver: TMPDIR=$TMPDIR is inside the checkout $checkout, which the copy's steps hide: use another" >&2; exit 2 ;;
esac
copy_out() {
  mkdir -p "$(dirname "$proj")" && cp -a "$tmp/generated" "$proj" && rm -rf "$tmp/generated"
  if grep -rlF -- "$checkout" "$proj"; then
    echo "e2e-new-driver: the files above name the checkout $checkout" >&2
    return 1
  fi
}
hidden() {
  # unshare -m: a private mount namespace (root, or unshare -rm elsewhere).
  local u=(unshare -m)
  [[ $(id -u) -eq 0 ]] || u=(unshare -rm)
  "${u[@]}" bash -euo pipefail -c '
    mount -t tmpfs -o size=1m,mode=0555 hidden "$1"
    [[ -z "$(ls -A "$1")" ]] || { echo "the checkout $1 is still visible" >&2; exit 1; }
    cd "$2"; shift 2
    export GOWORK=off
    "$@"' hidden "$checkout" "$proj" "$@"
}
proj=$tmp/elsewhere/$(basename "$module")
step "copy outside the checkout" copy_out
step "go mod tidy (copy, checkout hidden)" hidden "$go" mod tidy
step "make build (copy, checkout hidden)" hidden nice -n 10 make --no-print-directory build GO="$go"
step "make test (copy, checkout hidden)" hidden nice -n 10 make --no-print-directory test GO="$go"
# buildah's storage in the temporary directory: removed with it.
step "make image (generated)" nice -n 10 make -C "$proj" --no-print-directory image GO="$go" BUILDAH_ROOT="$tmp/buildah"
# VERIFY_ARGS as for make e2e-driver (e.g. --registrar-logs=blocked). Its step
# includes the wait for the node's lock: the time on the node is its own line.
e2e_driver() {
  make --no-print-directory e2e-driver GO="$go" DRIVER="$proj/manifests" DRIVER_IMAGES="$proj/bin/image.tar" \
    VERIFY_ARGS="${VERIFY_ARGS:-}" 2>&1 | tee "$tmp/e2e-driver.log"
}
rc=0
step "make e2e-driver (generated manifests/)" e2e_driver || rc=$?
on_node=$(sed -n 's/^==== e2e-driver: \([0-9]*\) s$/\1/p' "$tmp/e2e-driver.log" | tail -1)
[[ -z "$on_node" ]] || times+=("$(printf '%6s s    of which on the node (lock held: up, images loaded, verify)' "$on_node")")
exit "$rc"
