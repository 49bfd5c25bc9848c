#!/usr/bin/env bash
# Keep the local node's kubelet running, as systemd keeps a node's: start it as up.sh
# always did (lib.sh start_kubelet: its pid in kubelet.pid, its log in kubelet.log, the
# previous one in kubelet.log.1) and start it again 1 s after it exits, however it
# exited, so that killing the kubelet restarts it (restart-kubelet.sh, `kubectl
# csi-registrar verify`'s kubelet restart). SIGTERM stops the loop and leaves the
# kubelet as it is (down.sh then stops it). Started by lib.sh start_supervised_kubelet.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

echo "$$" >"$RUN_DIR/kubelet-supervisor.pid"
trap 'echo "$(date -u +%FT%TZ) supervisor stopped (SIGTERM)"; exit 0' TERM INT
while :; do
  start_kubelet
  pid=$(<"$RUN_DIR/kubelet.pid")
  echo "$(date -u +%FT%TZ) kubelet started (pid $pid)"
  # Poll rather than wait: a trap runs at once, and the kubelet may be reaped by anyone.
  while proc_running "$pid"; do sleep 0.2; done
  echo "$(date -u +%FT%TZ) kubelet (pid $pid) exited: starting it again in 1 s"
  sleep 1
done
