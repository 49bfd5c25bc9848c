#!/usr/bin/env bash
# Stop the local node started by up.sh and undo its host changes. Idempotent.
#   down.sh           stop; keep etcd data, images and certs (up.sh resumes the cluster)
#   down.sh --purge   also wipe that state (the built binaries stay)
# Only processes recorded in pid files are signalled, each after checking that
# /proc/PID/cmdline is the expected binary. Pods are removed by the kubelet first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

purge=false
only_this=false
for a in "$@"; do
  case "$a" in
    --purge) purge=true ;;
    --this-version-only) only_this=true ;; # internal: see the end of this file
    *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "down.sh must run as root"

TASK_DIR="$LOCALNODE_RUNTIME/containerd/io.containerd.runtime.v2.task/k8s.io"

# A clone pinned to another Kubernetes version may have left a node running: stop it
# with that version's binaries and pid files.
if ! $only_this; then
  for d in "$LOCALNODE_ROOT"/*/run; do
    v=$(basename "$(dirname "$d")")
    [[ "$v" != "$LOCALNODE_KEY" ]] || continue
    compgen -G "$d/*.pid" >/dev/null || continue
    echo "down: a node of Kubernetes $v is recorded in $d"
    LOCALNODE_K8S_VERSION=$v "$here/down.sh" --this-version-only
  done
fi

step "stopping the local node ($LOCALNODE_KEY)"

# 1. Let the kubelet remove the pods, so that sandboxes are torn down through CRI
#    (CNI DEL, unmounts). Stop the controllers first so nothing recreates them.
if alive kubelet && alive containerd && alive kube-apiserver && apiserver_ok >/dev/null 2>&1; then
  stop_daemon kube-controller-manager
  stop_daemon kube-scheduler
  if compgen -G "$MANIFESTS_DIR/*" >/dev/null; then
    mkdir -p "$LOCALNODE_CACHE/manifests.off"
    mv "$MANIFESTS_DIR"/* "$LOCALNODE_CACHE/manifests.off/"
  fi
  if [[ -n "$(k get pods -A -o name 2>/dev/null)" ]]; then
    echo "  deleting all pods through the API"
    k delete pods --all --all-namespaces --grace-period=10 --wait=false >/dev/null 2>&1 || true
  fi
  pods_gone() { [[ -z "$(k get pods -A -o name 2>/dev/null)" && -z "$(c tasks ls -q 2>/dev/null)" ]]; }
  if wait_for 60 pods_gone; then
    step "kubelet removed all pods"
  else
    echo "  pods still present after 60s: stopping their containers directly"
  fi
elif alive kube-apiserver && apiserver_ok >/dev/null 2>&1; then
  # The kubelet is gone (crashed): its pods cannot terminate normally. Drop them from
  # the API; their containers are stopped below.
  stop_daemon kube-controller-manager
  stop_daemon kube-scheduler
  k delete pods --all --all-namespaces --force --grace-period=0 >/dev/null 2>&1 || true
fi

stop_daemon kube-controller-manager
stop_daemon kube-scheduler
stop_supervisor
stop_daemon kubelet

# 2. Containers the kubelet did not remove. If containerd died while tasks were
#    running, start it again briefly so that it can stop them and their shims.
if ! alive containerd && compgen -G "$TASK_DIR/*" >/dev/null && [[ -f "$ETC_DIR/containerd.toml" ]]; then
  echo "  containerd is not running but has tasks: starting it to stop them"
  start_daemon containerd --config "$ETC_DIR/containerd.toml"
  wait_for 30 containerd_ok || echo "  containerd did not come up"
fi
if alive containerd && containerd_ok >/dev/null 2>&1; then
  tasks=$(c tasks ls -q 2>/dev/null || true)
  if [[ -n "$tasks" ]]; then
    echo "  killing $(wc -l <<<"$tasks") leftover container(s)"
    for t in $tasks; do c tasks kill --signal SIGKILL "$t" >/dev/null 2>&1 || true; done
    for t in $tasks; do
      for _ in 1 2 3 4 5 6 7 8 9 10; do c tasks delete "$t" >/dev/null 2>&1 && break; sleep 0.2; done
    done
  fi
  for ctr in $(c containers ls -q 2>/dev/null || true); do
    c containers delete "$ctr" >/dev/null 2>&1 || true
  done
fi
stop_daemon containerd
stop_daemon kube-apiserver
stop_daemon etcd
step "processes stopped"

# 3. Host state.
# Mounts: pod volumes under the kubelet root (not the root itself), pod network
# namespaces, container rootfs and shm under our containerd state and root.
mapfile -t mnts < <(
  {
    kubelet_mounts
    mounts_under "$LOCALNODE_RUNTIME" "$DATA_DIR/containerd"
    awk '{print $5}' /proc/self/mountinfo | grep -E '^/(var/)?run/netns/cni-' || true
  } | sort -r -u
)
if [[ ${#mnts[@]} -gt 0 ]]; then
  echo "  unmounting ${#mnts[@]} mount(s)"
  for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "  cannot unmount $m"; done
fi
rm -f /run/netns/cni-*
# Pod directories of the removed pods (the kubelet is stopped before it gets to them);
# --one-file-system never descends into a mount that is somehow still there.
if [[ -d "$KUBELET_ROOT/pods" ]]; then
  find "$KUBELET_ROOT/pods" -mindepth 1 -maxdepth 1 -exec rm -rf --one-file-system {} + 2>/dev/null || true
fi
if ! mountpoint -q "$KUBELET_ROOT"; then rm -f "$STATE_DIR/kubelet-root-not-mounted-before"; fi

if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
  ip link delete "$CNI_BRIDGE" && echo "  deleted link $CNI_BRIDGE"
fi

# iptables chains CNI-* (bridge, portmap plugins) and KUBE-* (kubelet), both families:
# drop the rules that jump to them, then flush and delete the chains.
for ipt in iptables ip6tables; do
  command -v "$ipt" >/dev/null || continue
  for table in filter nat mangle; do
    rules=$("$ipt" -w -t "$table" -S 2>/dev/null) || continue
    chains=$(awk '$1 == "-N" && $2 ~ /^(CNI-|KUBE-)/ {print $2}' <<<"$rules")
    [[ -n "$chains" ]] || continue
    # Rules in other chains that jump to ours. iptables -S quotes like a shell does.
    while read -r rule; do
      [[ -n "$rule" ]] || continue
      eval "$ipt -w -t $table ${rule/#-A/-D}" 2>/dev/null || true
    done < <(awk '$1 == "-A" && $2 !~ /^(CNI-|KUBE-)/ && / -[jg] (CNI-|KUBE-)/' <<<"$rules")
    for ch in $chains; do "$ipt" -w -t "$table" -F "$ch" 2>/dev/null || true; done
    for ch in $chains; do "$ipt" -w -t "$table" -X "$ch" 2>/dev/null || true; done
    echo "  removed $ipt $table chains: $(tr '\n' ' ' <<<"$chains")"
  done
done

# CNI IPAM reservations and cached results of our network (and containerd's loopback one).
rm -rf "/var/lib/cni/networks/$CNI_NET" /var/lib/cni/results/"$CNI_NET"-* /var/lib/cni/results/cni-loopback-*

# kubepods cgroups, deepest first (only empty ones can go).
for ctl in /sys/fs/cgroup/*/; do
  if [[ -d "${ctl}kubepods" ]]; then
    find "${ctl}kubepods" -depth -type d -exec rmdir {} + 2>/dev/null || true
    if [[ -d "${ctl}kubepods" ]]; then echo "  cgroup ${ctl}kubepods is still in use"; fi
  fi
done

# Sockets of plugins (CSI drivers, registrars) and of the kubelet itself.
for d in plugins_registry plugins device-plugins pod-resources; do
  if [[ -d "$KUBELET_ROOT/$d" ]]; then find "$KUBELET_ROOT/$d" -type s -delete || true; fi
done

# Our containerd state and runc root, unless a shim of ours survived (then keep it, so
# that the next containerd can still reach and stop the containers).
shims=()
for f in /proc/[0-9]*/cmdline; do
  args=$(tr '\0' ' ' 2>/dev/null <"$f") || continue
  [[ "$args" == *containerd-shim*" $CONTAINERD_ADDRESS"* ]] || continue
  p=${f#/proc/}
  shims+=("${p%/cmdline}")
done
# A shim of ours that runs no process (a container whose creation was cancelled, e.g.
# by a kubelet restart) serves nothing any containerd could stop: end it.
held=()
for p in "${shims[@]}"; do
  if ! grep -qsl "^PPid:[[:space:]]*$p\$" /proc/[0-9]*/status; then
    echo "  ending containerd shim $p: it runs no container process"
    kill "$p" 2>/dev/null || true
  else
    held+=("$p")
  fi
done
shims=("${held[@]}")
if [[ ${#shims[@]} -gt 0 ]]; then
  echo "  WARNING: containerd shims still running (pids ${shims[*]}): keeping $LOCALNODE_RUNTIME"
elif [[ -d "$LOCALNODE_RUNTIME" ]]; then
  rm -rf --one-file-system "$LOCALNODE_RUNTIME"
fi

# Kernel settings the kubelet and the bridge plugin changed.
if [[ -f "$STATE_DIR/sysctl.orig" ]]; then
  while IFS='=' read -r key val; do
    [[ -n "$key" ]] || continue
    [[ "$(sysctl -n "$key" 2>/dev/null)" == "$val" ]] || sysctl -qw "$key=$val" || true
  done <"$STATE_DIR/sysctl.orig"
  rm -f "$STATE_DIR/sysctl.orig"
fi

# Directories that did not exist before up.sh: empty ones go now, the rest on --purge.
# Pod logs in them belong to pods removed above (the kubelet deletes them itself when
# it gets the time; it does not after a crash).
if [[ -f "$STATE_DIR/created-dirs" ]]; then
  while read -r d; do
    [[ -d "$d" ]] || continue
    case "$d" in
      /var/log/pods | /var/log/containers) find "$d" -mindepth 1 -delete 2>/dev/null || true ;;
    esac
    if $purge; then
      rm -rf --one-file-system "$d"
    else
      find "$d" -depth -type d -empty -delete 2>/dev/null || true
    fi
  done <"$STATE_DIR/created-dirs"
fi

if [[ -d "$LOCALNODE_CACHE/manifests.off" ]]; then
  mv "$LOCALNODE_CACHE/manifests.off"/* "$MANIFESTS_DIR/" 2>/dev/null || true
  rmdir "$LOCALNODE_CACHE/manifests.off" 2>/dev/null || true
fi

if $purge; then
  if [[ -d "$KUBELET_ROOT" ]] && ! grep -qx "$KUBELET_ROOT" "$STATE_DIR/created-dirs" 2>/dev/null; then
    # The kubelet root existed before: remove only the kubelet's own state
    # (what a v1.34 kubelet writes there; plugins/ and plugins_registry/ may
    # hold other drivers' files and stay).
    for e in pods pki checkpoints cpu_manager_state memory_manager_state dra_manager_state \
      allocated_pods_state actuated_pods_state pod-resources device-plugins; do
      rm -rf --one-file-system "${KUBELET_ROOT:?}/$e"
    done
  fi
  rm -rf --one-file-system "$DATA_DIR" "$PKI_DIR" "$ETC_DIR" "$LOG_DIR" "$STATE_DIR" \
    "$RUN_DIR" "$MANIFESTS_DIR" "$KUBECACHEDIR" "$LOCALNODE_CACHE/env"
  step "purged state (binaries kept in $LOCALNODE_BIN)"
fi
step "local node is down"
