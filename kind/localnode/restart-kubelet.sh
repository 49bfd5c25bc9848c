#!/usr/bin/env bash
# Restart the local node's kubelet, as an upgrade or a crash-and-restart would: stop it
# (SIGTERM to the pid in its pid file, SIGKILL after 20 s) and have kubelet-supervisor.sh
# start it again as up.sh does (a node without the supervisor: start it under one), and wait until it answers /healthz and then (unless --no-wait-ready) until it has
# posted a Ready heartbeat newer than the restart. Pods keep running: containerd holds them.
#   restart-kubelet.sh [--no-wait-ready]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

wait_ready=true
for a in "$@"; do
  case "$a" in
    --no-wait-ready) wait_ready=false ;;
    *) echo "usage: $0 [--no-wait-ready]" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "restart-kubelet.sh must run as root"
alive kubelet || die "the local node's kubelet is not running (start the node with kind/localnode/up.sh)"
[[ -f "$ETC_DIR/kubelet-config.yaml" ]] || die "no kubelet configuration in $ETC_DIR (kind/localnode/up.sh writes it)"

since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
old=$(pid_of kubelet)
if supervisor_pid >/dev/null; then
  step "stopping the kubelet (pid $old); its supervisor starts it again"
  stop_daemon kubelet
  wait_for 30 bash -c '[[ -s "$1" && "$(<"$1")" != "$2" ]]' _ "$RUN_DIR/kubelet.pid" "$old" ||
    die "kubelet-supervisor.sh did not start a new kubelet within 30 s (log: $LOG_DIR/kubelet-supervisor.log)"
  wait_for 5 alive kubelet || die "the new kubelet exited (log: $LOG_DIR/kubelet.log)"
else
  step "stopping the kubelet (pid $old)"
  stop_daemon kubelet
  step "starting the kubelet (node $NODE_NAME) under kubelet-supervisor.sh"
  start_supervised_kubelet
fi
wait_daemon kubelet 60 kubelet_ok
step "kubelet answers /healthz"
if $wait_ready; then
  wait_daemon kubelet 120 node_ready "$since"
  step "node $NODE_NAME Ready"
fi
