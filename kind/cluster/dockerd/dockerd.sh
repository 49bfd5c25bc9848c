#!/usr/bin/env bash
# A private Docker engine for kind on a machine that has none answering:
# Debian's docker.io dockerd with its own data root, exec root, socket, pid file
# and config file, which leaves the host's iptables, ip6tables and sysctls alone
# (--iptables=false --ip6tables=false --ip-forward=false --ip-masq=false, no
# default bridge). A user's own Docker is never touched: this one has its own socket.
#   dockerd.sh start    start it (installs docker.io first if missing); idempotent
#   dockerd.sh stop     stop it, and remove what dockerd leaves on the host
#   dockerd.sh status   exit 0 when it runs and answers
#   dockerd.sh env      print `export DOCKER_HOST=...` for it
# Capabilities: where the host's bounding set lacks one, `docker run --privileged`
# fails in runc; the runtime wrapper runc-capfilter is then the default runtime.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../lib.sh
source "$here/../../lib.sh"

DOCKERD_RUN=${KIND_DOCKERD_RUN:-/run/csi-registrar-kind}
DOCKERD_SOCK="$DOCKERD_RUN/docker.sock"
DOCKERD_PID="$DOCKERD_RUN/docker.pid"
DOCKERD_EXEC="$DOCKERD_RUN/exec"
DOCKERD_DATA="$KIND_CACHE/docker"
DOCKERD_LOG="$KIND_CACHE/dockerd.log"
# What dockerd creates outside its own directories, recorded at start when it was
# not there before, so that stop removes exactly that (if still empty).
DOCKERD_STRAY="$DOCKERD_RUN/stray-dirs"

# missing_caps: the capabilities the bounding set of this process lacks, by name.
missing_caps() { bash "$here/runc-capfilter" --missing-caps; }

running() {
  local pid
  [[ -s "$DOCKERD_PID" ]] || return 1
  pid=$(<"$DOCKERD_PID")
  [[ -r /proc/$pid/cmdline && "$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n1)" == "$(command -v dockerd || echo /usr/sbin/dockerd)" ]] || return 1
  DOCKER_HOST="unix://$DOCKERD_SOCK" docker_cli version >/dev/null 2>&1
}

start() {
  if running; then
    echo "private dockerd: already running (pid $(<"$DOCKERD_PID"), $DOCKERD_SOCK)"
    return
  fi
  install_debs docker.io jq
  mkdir -p "$DOCKERD_RUN" "$DOCKERD_DATA" "$KIND_CACHE/bin"
  : >"$DOCKERD_STRAY"
  local d
  # (/run/containerd/s: the shim sockets' directory of the containerd dockerd starts.)
  for d in /run/docker /run/docker/plugins /etc/docker /run/containerd /run/containerd/s; do
    [[ -e "$d" ]] || echo "$d" >>"$DOCKERD_STRAY"
  done
  local runtime_args=()
  if [[ -n "$(missing_caps)" ]]; then
    install -m 0755 "$here/runc-capfilter" "$KIND_CACHE/bin/runc-capfilter"
    runtime_args=(--add-runtime "capfilter=$KIND_CACHE/bin/runc-capfilter" --default-runtime capfilter)
    echo "private dockerd: the host's capability bounding set lacks $(missing_caps | paste -sd, -): runtime runc-capfilter drops it from containers"
  fi
  # Our own config file: a user's /etc/docker/daemon.json is not read, and the
  # engine's identity key is kept with its data instead of /etc/docker/key.json.
  printf '{"deprecated-key-path": "%s"}\n' "$DOCKERD_DATA/key.json" >"$DOCKERD_RUN/daemon.json"
  # setsid, descriptors above 2 closed: not killed by ^C on make, and it does not
  # inherit (and keep) a lock of the caller.
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [[ $fd -gt 2 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid "$(command -v dockerd)" \
      --config-file "$DOCKERD_RUN/daemon.json" \
      --data-root "$DOCKERD_DATA" --exec-root "$DOCKERD_EXEC" \
      --host "unix://$DOCKERD_SOCK" --pidfile "$DOCKERD_PID" \
      --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false --bridge=none \
      "${runtime_args[@]}" </dev/null >"$DOCKERD_LOG" 2>&1
  ) &
  local i
  for ((i = 0; i < 300; i++)); do
    if running; then
      echo "private dockerd: up (pid $(<"$DOCKERD_PID"), socket $DOCKERD_SOCK, data $DOCKERD_DATA)"
      return
    fi
    if ! kill -0 $! 2>/dev/null; then break; fi
    sleep 0.2
  done
  tail -n 20 "$DOCKERD_LOG" >&2 || true
  die "private dockerd did not come up (log: $DOCKERD_LOG)"
}

stop() {
  local pid i
  if [[ -s "$DOCKERD_PID" ]] && running; then
    pid=$(<"$DOCKERD_PID")
    kill -TERM "$pid"
    for ((i = 0; i < 300; i++)); do
      [[ -d /proc/$pid ]] || break
      sleep 0.1
    done
    if [[ -d /proc/$pid ]]; then
      echo "private dockerd: pid $pid ignored SIGTERM for 30s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "private dockerd: stopped (pid $pid)"
  fi
  # dockerd unmounts its own mounts on a clean stop; after a SIGKILL they may stay.
  local m
  for m in $(awk -v d="$DOCKERD_RUN" '{ if ($5 == d || index($5, d "/") == 1) print $5 }' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
  if [[ -f "$DOCKERD_STRAY" ]]; then
    tac "$DOCKERD_STRAY" | while read -r d; do rmdir "$d" 2>/dev/null || true; done
  fi
  rm -rf "$DOCKERD_RUN"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) running ;;
  env) echo "export DOCKER_HOST=unix://$DOCKERD_SOCK" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
