#!/usr/bin/env bash
# Helpers shared by up.sh, down.sh and build.sh. Source it after env.sh.
# shellcheck disable=SC2034  # variables are used by the scripts that source this file

K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
# etcd's main package: the root of its server module, which k8sbuild/<minor>/ requires at
# the version that Kubernetes release pins (1.34-1.37 want etcd >= 3.5.24; on Debian's 3.4,
# which sends no progress notification on request, the API server ends a watch without
# resourceVersion on an idle resource with 504 after 3 s).
ETCD_PKG=go.etcd.io/etcd/server/v3
# What the node runs from build.sh's output.
NODE_BINS=("${K8S_BINS[@]}" etcd)
# What a kind node image needs besides those (build.sh --with-kind).
K8S_KIND_BINS=(kubeadm kube-proxy)
RUN_DIR="$LOCALNODE_CACHE/run"     # pid files
LOG_DIR="$LOCALNODE_CACHE/logs"
PKI_DIR="$LOCALNODE_CACHE/pki"
ETC_DIR="$LOCALNODE_CACHE/etc"
DATA_DIR="$LOCALNODE_CACHE/data"   # etcd, containerd root: wiped by down.sh --purge
ETCD_DATA="$DATA_DIR/etcd-pinned"       # the data of the etcd Kubernetes pins (build.sh builds it)
ETCD_VERSION_FILE="$ETCD_DATA.version"   # the etcd that last ran on it (up.sh writes it)
# Debian's etcd 3.4 kept its data in data/etcd: no etcd that Kubernetes 1.34+ pins reads it.
# (A clone of an older commit may still run that etcd there: separate directories keep
# either etcd from starting on the other's data.)
ETCD34_DATA="$DATA_DIR/etcd"
STATE_DIR="$LOCALNODE_CACHE/state" # what up.sh changed on the host, so down.sh can undo it
IMAGES_DIR="$LOCALNODE_CACHE/images"
MANIFESTS_DIR="$LOCALNODE_CACHE/manifests" # kubelet staticPodPath
CNI_NET=csi-registrar-localnode
CNI_BRIDGE=cni0
KUBELET_ROOT=/var/lib/kubelet
PAUSE_IMAGE=localhost/csi-registrar/pause:local
APISERVER=https://127.0.0.1:6443
# Sysctls the kubelet (kernel tunables) and the bridge CNI plugin (ip_forward) change.
HOST_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

# The clock starts with the outermost script (up.sh exports it to the down.sh it runs).
_T0=${LOCALNODE_T0:-$EPOCHREALTIME}
# step MESSAGE: progress line with the time elapsed since the script started.
step() {
  local now=${EPOCHREALTIME}
  printf '[%7.1fs] %s\n' "$(awk -v a="$_T0" -v b="$now" 'BEGIN{print b-a}')" "$*"
}
elapsed() { awk -v a="$_T0" -v b="${EPOCHREALTIME}" 'BEGIN{printf "%.1f", b-a}'; }
die() { echo "ERROR: $*" >&2; exit 1; }

# The absolute path a component is started from; pid files are checked against it.
bin_path() {
  case "$1" in
    containerd) command -v containerd || echo /usr/bin/containerd ;;
    *) echo "$LOCALNODE_BIN/$1" ;;
  esac
}

# pid_of NAME [RUN_DIR]: prints the PID from the pid file if that process is alive and
# really is the expected binary (argv[0] of /proc/PID/cmdline), guarding against PID reuse.
pid_of() {
  local name=$1 dir=${2:-$RUN_DIR} pid argv0
  [[ -s "$dir/$name.pid" ]] || return 1
  pid=$(<"$dir/$name.pid")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n1) || return 1
  proc_running "$pid" || return 1
  # /usr/bin/etcd: Debian's etcd, which a node started before the local node built its own.
  [[ "$argv0" == "$(bin_path "$name")" || "$name $argv0" == "etcd /usr/bin/etcd" ]] || return 1
  echo "$pid"
}
alive() { pid_of "$1" >/dev/null; }
# proc_running PID: the process exists and is not a zombie (a killed daemon can linger
# as a zombie until its parent, often long gone, is reaped by init).
proc_running() {
  local st
  st=$(awk '/^State:/{print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [[ -n "$st" && "$st" != Z ]]
}

# start_daemon NAME ARGS...: start a component in its own session, log to LOG_DIR,
# record its PID in RUN_DIR.
start_daemon() {
  local name=$1 bin; shift
  bin=$(bin_path "$name")
  [[ -x "$bin" ]] || die "$name: $bin not found"
  mkdir -p "$RUN_DIR" "$LOG_DIR"
  [[ -f "$LOG_DIR/$name.log" ]] && mv -f "$LOG_DIR/$name.log" "$LOG_DIR/$name.log.1"
  # setsid: not in our process group, so ^C on make does not kill the node.
  # (The script has no job control, so setsid execs in place and $! is the daemon.)
  # Descriptors above 2 are closed first: a daemon must not inherit the lock of a
  # `flock /tmp/csi-registrar-localnode.lock ...` wrapper, or the lock would stay held
  # until the node goes down and every other user of the node would wait forever.
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [[ $fd -gt 2 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid "$bin" "$@" </dev/null >"$LOG_DIR/$name.log" 2>&1
  ) &
  local pid=$! i
  echo "$pid" >"$RUN_DIR/$name.pid"
  # Return once the subshell has exec'ed the daemon (or died): until then its argv0 is
  # bash, so pid_of (which guards against PID reuse by argv0) would call the daemon gone.
  for ((i = 0; i < 250; i++)); do
    proc_running "$pid" || break
    [[ "$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1)" == "$bin" ]] && break
    sleep 0.02
  done
}

# start_kubelet: the kubelet as up.sh starts it (restart-kubelet.sh starts it the same way).
start_kubelet() {
  start_daemon kubelet \
    --config="$ETC_DIR/kubelet-config.yaml" \
    --kubeconfig="$PKI_DIR/kubelet.kubeconfig" \
    --root-dir="$KUBELET_ROOT" \
    --v=2
}

# supervisor_pid: the PID of kubelet-supervisor.sh from its pid file, if it runs.
supervisor_pid() {
  local pid
  [[ -s "$RUN_DIR/kubelet-supervisor.pid" ]] || return 1
  pid=$(<"$RUN_DIR/kubelet-supervisor.pid")
  [[ "$pid" =~ ^[0-9]+$ ]] && proc_running "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kubelet-supervisor.sh' || return 1
  echo "$pid"
}

# start_supervised_kubelet: the kubelet under kubelet-supervisor.sh, which starts it
# again whenever it exits; returns once the supervisor's kubelet runs. Descriptors
# above 2 are closed first (a held node lock must not leak into the loop).
start_supervised_kubelet() {
  local i
  rm -f "$RUN_DIR/kubelet.pid"
  mkdir -p "$RUN_DIR" "$LOG_DIR"
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [[ $fd -gt 2 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid bash "$LOCALNODE_SRC/kubelet-supervisor.sh" </dev/null >>"$LOG_DIR/kubelet-supervisor.log" 2>&1
  ) &
  for ((i = 0; i < 250; i++)); do
    alive kubelet && return 0
    sleep 0.02
  done
  die "kubelet-supervisor.sh did not start the kubelet (log: $LOG_DIR/kubelet-supervisor.log)"
}

# stop_supervisor: stop the loop, so that the kubelet stays stopped once stopped.
stop_supervisor() {
  local pid
  if pid=$(supervisor_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    while proc_running "$pid"; do sleep 0.05; done
    echo "  stopped kubelet-supervisor (pid $pid)"
  fi
  rm -f "$RUN_DIR/kubelet-supervisor.pid"
}

# stop_daemon NAME [RUN_DIR] [TIMEOUT_S]: SIGTERM, then SIGKILL after the timeout.
stop_daemon() {
  local name=$1 dir=${2:-$RUN_DIR} timeout=${3:-20} pid i
  if pid=$(pid_of "$name" "$dir"); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      proc_running "$pid" || break
      sleep 0.1
    done
    if pid_of "$name" "$dir" >/dev/null; then
      echo "  $name ($pid) ignored SIGTERM for ${timeout}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "  stopped $name (pid $pid)"
  elif [[ -e "$dir/$name.pid" ]]; then
    echo "  $name: stale pid file, process gone"
  fi
  rm -f "$dir/$name.pid"
}

# wait_for SECONDS COMMAND...: poll every 0.2 s until COMMAND succeeds.
wait_for() {
  local end=$((SECONDS + $1)); shift
  # A deadline by the clock, not a count of tries: a check can take seconds
  # (listing thousands of pods), which made 60 s of tries last 20 minutes.
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || return 1
    sleep 0.2
  done
}

# wait_daemon NAME SECONDS COMMAND...: like wait_for, but fails fast (with the end of
# the log) when the daemon exits, and on timeout.
wait_daemon() {
  local name=$1 secs=$2 end=$((SECONDS + $2)); shift 2
  while ((SECONDS < end)); do
    "$@" >/dev/null 2>&1 && return 0
    if ! alive "$name"; then
      tail -n 15 "$LOG_DIR/$name.log" >&2 || true
      die "$name exited (log: $LOG_DIR/$name.log)"
    fi
    sleep 0.2
  done
  tail -n 15 "$LOG_DIR/$name.log" >&2 || true
  die "$name not ready after ${secs}s (log: $LOG_DIR/$name.log)"
}

k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
c() { ctr --address "$CONTAINERD_ADDRESS" --namespace k8s.io "$@"; }

etcd_ok() { curl -sf --max-time 2 http://127.0.0.1:2379/health | grep -q '"health":"true"'; }
containerd_ok() { c version; }
apiserver_ok() { curl -sf --max-time 2 --cacert "$PKI_DIR/ca.crt" "$APISERVER/readyz"; }
kcm_ok() { curl -skf --max-time 2 https://127.0.0.1:10257/healthz; }
scheduler_ok() { curl -skf --max-time 2 https://127.0.0.1:10259/healthz; }
kubelet_ok() { curl -sf --max-time 2 http://127.0.0.1:10248/healthz; }
# node_ready [SINCE]: the node's Ready condition is True, and (with SINCE, an RFC 3339
# UTC time) was reported at or after SINCE, not left over in etcd from an earlier run.
node_ready() {
  local out
  out=$(k get node "$NODE_NAME" \
    -o 'jsonpath={range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}') || return 1
  [[ "${out%% *}" == True ]] || return 1
  [[ -z "${1:-}" || ! "${out#* }" < "$1" ]]
}

COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet)

# node_is_up: every component runs (the kubelet under its supervisor), the API server
# answers, the node is Ready
# (status.sh's answer, as an exit status).
node_is_up() {
  local n
  for n in "${COMPONENTS[@]}"; do alive "$n" || return 1; done
  supervisor_pid >/dev/null || return 1
  apiserver_ok >/dev/null 2>&1 && node_ready "" 2>/dev/null
}

# build_is_current [BIN...]: the binaries (default: the six of NODE_BINS) exist and were
# built from the pinned k8sbuild/<minor>/go.mod.
# A patched build's stamp also covers its patch (K8S_PATCH_FILE).
build_stamp() {
  echo "$LOCALNODE_KEY $(cat "$K8SBUILD_DIR/go.mod" "$K8SBUILD_DIR/go.sum" ${K8S_PATCH_FILE:+"$K8S_PATCH_FILE"} | sha256sum | cut -c1-16)"
}
build_is_current() {
  local b bins=("$@")
  [[ ${#bins[@]} -gt 0 ]] || bins=("${NODE_BINS[@]}")
  for b in "${bins[@]}"; do [[ -x "$LOCALNODE_BIN/$b" ]] || return 1; done
  [[ -f "$LOCALNODE_BIN/.stamp" && "$(<"$LOCALNODE_BIN/.stamp")" == "$(build_stamp)" ]] || return 1
  [[ "$("$LOCALNODE_BIN/kubelet" --version 2>/dev/null)" == "Kubernetes $LOCALNODE_KEY" ]] || return 1
  [[ " ${bins[*]} " != *" etcd "* || "$(etcd_version "$LOCALNODE_BIN/etcd")" == "$(etcd_pinned)" ]]
}

# etcd_pinned: the etcd version k8sbuild/<minor>/go.mod requires (3.7.0), as `etcd --version`
# prints it. etcd_version BIN: the version BIN prints.
etcd_pinned() { local v; v=$(gomod_required "$K8SBUILD_DIR/go.mod" "$ETCD_PKG") && echo "${v#v}"; }
etcd_version() { "$1" --version 2>/dev/null | sed -n 's/^etcd Version: //p'; }

# etcd_data_readable VERSION: etcd VERSION can start on ETCD_DATA: the etcd that wrote it
# had the same minor version or the one before (etcd upgrades one minor at a time and
# never downgrades by itself). Otherwise prints what wrote it.
etcd_data_readable() {
  local now=$1 was
  was=$(cat "$ETCD_VERSION_FILE" 2>/dev/null) || true
  if [[ ! "$was" =~ ^([0-9]+)\.([0-9]+)\. ]]; then
    echo "written by an etcd that left no readable version in $ETCD_VERSION_FILE"
    return 1
  fi
  local maj=${BASH_REMATCH[1]} min=${BASH_REMATCH[2]}
  [[ "$now" =~ ^([0-9]+)\.([0-9]+)\. ]] || return 1
  if [[ ${BASH_REMATCH[1]} == "$maj" ]] && ((BASH_REMATCH[2] == min || BASH_REMATCH[2] == min + 1)); then
    return 0
  fi
  echo "written by etcd $was"
  return 1
}

# build_lock WHO: holds, until the script exits, the lock of this version's Go builds
# (build.sh, storage/build-e2e.sh; kind/buildlock.sh). After a wait the clock
# restarts: the script's times are its own build's.
# shellcheck source=../buildlock.sh
source "$(dirname "${BASH_SOURCE[0]}")/../buildlock.sh"
build_lock() {
  hold_build_lock "$LOCALNODE_CACHE/build.lock" "$1" "Kubernetes $K8S_VERSION" || _T0=$EPOCHREALTIME
}

# k8s_go ARGS...: the go command with the toolchain of K8SBUILD_DIR's go.mod (env.sh's
# K8S_GOTOOLCHAIN: go1.27.4 for v1.38.0-beta.0), for the go commands run on that module only.
k8s_go() { env ${K8S_GOTOOLCHAIN:+GOTOOLCHAIN=$K8S_GOTOOLCHAIN} go "$@"; }

# k8s_ldflags [VERSION]: the -ldflags of a Go build from k8sbuild/<minor>/ (build.sh, build-e2e.sh),
# with the version (default K8S_VERSION; build-patched.sh: v1.37.2+NAME) stamped as
# Kubernetes' own hack/lib/version.sh does; build date = the release tag's time. Sharing one
# set of flags lets the builds share the Go build cache (-X is applied at link time only).
k8s_ldflags() {
  local date pkg flags="-s -w" minor=${K8S_MINOR#1.} version=${1:-$K8S_VERSION}
  # A pre-release's minor ends in "+" (v1.38.0-alpha.0: "38+"), as version.sh makes it.
  [[ "$K8S_VERSION" != *-* ]] || minor+="+"
  date=$(cd "$K8SBUILD_DIR" &&
    k8s_go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes) || return
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${date:-1970-01-01T00:00:00Z}"
  done
  echo "$flags"
}

# still_compiling WHO: until the script exits, prints "WHO: still compiling (Ns)" every
# minute, as go build is silent for minutes. (read -t on an idle pipe sleeps without a
# child process, so killing the loop is enough.)
still_compiling() {
  (while :; do read -rt 60 <> <(:) || true; echo "$1: still compiling ($(elapsed)s)"; done) &
  _ticker=$!
  trap 'kill "$_ticker" 2>/dev/null || true' EXIT
}

# Mounts the kubelet made: pod volumes below its root dir, and the root dir itself (the
# kubelet bind-mounts it onto itself to make it shared) unless it was a mount point
# before up.sh started the kubelet.
kubelet_mounts() {
  if [[ -f "$STATE_DIR/kubelet-root-not-mounted-before" ]]; then
    mounts_under "$KUBELET_ROOT"
  else
    mounts_under "$KUBELET_ROOT" | grep -vx "$KUBELET_ROOT" || true
  fi
}

# Mount points at or below a directory (deepest first), from /proc/self/mountinfo.
mounts_under() {
  local d
  for d in "$@"; do
    awk -v d="$d" '{ m = $5; gsub(/\\040/, " ", m); if (m == d || index(m, d "/") == 1) print m }' /proc/self/mountinfo
  done | sort -r -u
}
