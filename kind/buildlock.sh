# shellcheck shell=bash
# The lock of a version's builds: the one implementation, sourced by
# kind/localnode/lib.sh (build.sh, storage/build-e2e.sh: Kubernetes' Go builds)
# and kind/cluster/nodeimage/build.sh (the kind node image). A second build of the same
# version would compile the same packages again instead of finding them in the
# Go build cache (or build the same image twice), so it waits for the first.
#
# hold_build_lock FILE WHO WHAT: holds FILE's lock until the script exits.
# Returns 0 when it was free, 1 after waiting for another build ("WHO: another
# build of WHAT is running: waiting for it"), so that a caller can restart its
# clock: its times are then its own build's.
hold_build_lock() {
  local file=$1 who=$2 what=$3
  mkdir -p "$(dirname "$file")"
  exec {_build_lock_fd}>"$file"
  flock -n "$_build_lock_fd" && return 0
  echo "$who: another build of $what is running: waiting for it"
  flock "$_build_lock_fd"
  return 1
}
