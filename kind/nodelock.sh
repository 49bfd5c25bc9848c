#!/usr/bin/env bash
# The local node's lock: the one implementation, used by the Makefile's
# with_node_lock and by the e2e suite (kind/e2e), which runs itself again
# through this script when started without it.
#   nodelock.sh CMD [ARGS...]
# Runs CMD under /tmp/csi-registrar-localnode.lock (LOCALNODE_LOCK overrides),
# which every use of the local node or kind holds: up, down, demo, e2e, bench.
# Re-entrant: a caller that already holds it (LOCALNODE_LOCKED=1 in its
# environment) runs CMD at once. flock -o: the lock is held by flock itself,
# not inherited by the daemons CMD starts (they would keep it after CMD ends).
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: nodelock.sh CMD [ARGS...]" >&2; exit 2; }
if [[ "${LOCALNODE_LOCKED:-}" == 1 ]]; then exec "$@"; fi
lock=${LOCALNODE_LOCK:-/tmp/csi-registrar-localnode.lock}
command -v flock >/dev/null || bash "$(dirname "${BASH_SOURCE[0]}")/localnode/install-deps.sh" util-linux >&2
flock -n "$lock" true || echo "waiting for $lock: another user of the local node holds it"
exec flock -o "$lock" env LOCALNODE_LOCKED=1 "$@"
