#!/usr/bin/env bash
# Bring up a real single-node Kubernetes on this machine, without Docker:
# etcd + kube-apiserver + kube-controller-manager + kube-scheduler + containerd + kubelet,
# all on 127.0.0.1. Idempotent: does nothing when the node is already up, and cleans up
# after a crashed run (stale pid files, leftover mounts) before starting.
# A cold run installs Debian packages and builds Kubernetes from the Go module proxy.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

[[ $(id -u) -eq 0 ]] || die "up.sh must run as root (containerd, kubelet, mounts, iptables)"

write_env() {
  mkdir -p "$LOCALNODE_CACHE"
  echo "$NODE_NAME" >"$LOCALNODE_CACHE/node-name"
  {
    echo "# Written by kind/localnode/up.sh; source it."
    for v in K8S_VERSION K8S_PATCH LOCALNODE_CACHE KUBECONFIG KUBECTL KUBECACHEDIR NODE_NAME CONTAINERD_ADDRESS CONTAINERD_NAMESPACE; do
      printf 'export %s=%q\n' "$v" "${!v}"
    done
  } >"$LOCALNODE_CACHE/env"
}

finish() {
  write_env
  echo
  echo "Node $NODE_NAME is Ready (Kubernetes $LOCALNODE_KEY). Use it with:"
  echo "  export KUBECONFIG=$KUBECONFIG"
  echo "  alias kubectl=$KUBECTL        # or: source $LOCALNODE_CACHE/env"
}

# The node carries the project's marker of a node meant for disruptive tests
# (`kubectl csi-registrar verify` acts on it without --i-know-this-is-disruptive).
mark_node() { k label node "$NODE_NAME" csi-registrar.io/test-node=true --overwrite >/dev/null; }

# Anything a previous run may have left behind.
leftovers() {
  compgen -G "$LOCALNODE_ROOT/*/run/*.pid" >/dev/null && return 0
  local m
  m=$(kubelet_mounts; mounts_under "$LOCALNODE_RUNTIME")
  [[ -n "$m" ]] && return 0
  [[ -d "$LOCALNODE_RUNTIME" ]] && return 0
  ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && return 0
  return 1
}

cold=false
build_is_current || cold=true
if $cold; then
  echo "Cold start: Kubernetes $LOCALNODE_KEY is not built yet in $LOCALNODE_BIN."
  echo "This takes several minutes (6-8 min measured on 2 cores with an empty Go build cache); later runs take seconds."
fi

step "checking Debian packages"
"$here/install-deps.sh"
if $cold; then
  step "building Kubernetes $LOCALNODE_KEY binaries (cold: minutes)"
else
  step "Kubernetes $LOCALNODE_KEY binaries"
fi
"$here/build.sh"
step "pause image"
"$here/images/build-pause.sh"

# A node up.sh started before the kubelet had a supervisor: put its kubelet under one
# (a restart: pods keep running, containerd holds them).
if alive kubelet && ! supervisor_pid >/dev/null && apiserver_ok >/dev/null 2>&1; then
  step "the kubelet runs without its supervisor: restarting it under kubelet-supervisor.sh"
  since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  stop_daemon kubelet
  start_supervised_kubelet
  wait_daemon kubelet 60 kubelet_ok
  wait_daemon kubelet 120 node_ready "$since"
fi

if node_is_up; then
  step "node $NODE_NAME is already up"
  mark_node
  finish
  exit 0
fi

# One version per node at a time: a node of another version must be stopped first.
for d in "$LOCALNODE_ROOT"/*/run; do
  v=$(basename "$(dirname "$d")")
  [[ "$v" != "$LOCALNODE_KEY" ]] || continue
  if LOCALNODE_K8S_VERSION=$v bash -c 'source "$1/env.sh"; source "$1/lib.sh"; for n in "${COMPONENTS[@]}"; do alive "$n" && exit 0; done; exit 1' _ "$here"; then
    die "the local node is running Kubernetes $v; this run wants $LOCALNODE_KEY. Stop it first: make local-down (then up again with K8S=$([[ $K8S_VERSION == *-* ]] && echo "${K8S_VERSION#v}" || echo "$K8S_MINOR"))"
  fi
done

ports=(2379 2380 2381 6443 10248 10250 10257 10259)
# listener PORT prints the first listening socket on PORT with its process ("" none).
listener() { ss -Hltnp "sport = :$1" 2>/dev/null | head -n1 || true; }
# foreign_listener prints the first of the node's ports a process listens on that
# no pid file under LOCALNODE_ROOT names: a node started from another HOME or
# checkout (its state elsewhere; /run and cni0 are shared), or another Kubernetes.
foreign_listener() {
  local p line pid own=" "
  for f in "$LOCALNODE_ROOT"/*/run/*.pid; do [[ -s "$f" ]] && own+="$(<"$f") "; done
  for p in "${ports[@]}"; do
    line=$(listener "$p")
    [[ -n "$line" ]] || continue
    pid=$(grep -o 'pid=[0-9]*' <<<"$line" | head -n1 | cut -d= -f2)
    [[ -n "$pid" && "$own" == *" $pid "* ]] && continue
    echo "port $p: $line"
    return 0
  done
  return 1
}
# Checked before any clean-up: down.sh would remove that node's bridge and chains.
if f=$(foreign_listener); then
  die "a Kubernetes this checkout did not start is up ($f; its state is not under $LOCALNODE_ROOT). Nothing was changed. Stop it where it was started (make demo-down, make local-down), then run this again"
fi

if leftovers; then
  step "state from a previous run found: running down.sh first"
  LOCALNODE_T0=$_T0 "$here/down.sh"
fi

for p in "${ports[@]}"; do
  line=$(listener "$p")
  [[ -z "$line" ]] || die "port $p is already in use (another etcd/Kubernetes?): $line"
done

step "certificates and configuration"
"$here/certs.sh"
mkdir -p "$ETC_DIR/cni" "$DATA_DIR" "$STATE_DIR" "$MANIFESTS_DIR" "$RUN_DIR" "$LOG_DIR"
write_env

cat >"$ETC_DIR/containerd.toml" <<EOT
# Generated by kind/localnode/up.sh
version = 2
root = "$DATA_DIR/containerd"
state = "$LOCALNODE_RUNTIME/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$CONTAINERD_ADDRESS"

[plugins."io.containerd.internal.v1.opt"]
  path = "$DATA_DIR/containerd-opt"

[plugins."io.containerd.grpc.v1.cri"]
  # No image can be pulled here: the sandbox image is built locally (images/pause).
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: without this, runc fails to lower oom_score_adj
  # and every pod dies with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$LOCALNODE_RUNTIME/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC_DIR/cni"
    max_conf_num = 1
EOT

# Pods only talk to each other and the host: no masquerading to the outside.
cat >"$ETC_DIR/cni/10-$CNI_NET.conflist" <<EOT
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "10.88.0.0/16"}]],
        "routes": [{"dst": "10.88.0.0/16"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOT

# Kubernetes 1.35+ (KEP-5573) refuses to start a kubelet on a cgroup v1 host unless
# failCgroupV1 is false; 1.34 accepts the field too. Set only where it is needed.
cgroup_fs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null || echo unknown)
if [[ "$cgroup_fs" == cgroup2fs ]]; then
  fail_cgroup_v1="# cgroup v2 host: the kubelet's default (failCgroupV1: true) is fine."
  step "cgroup v2 host: kubelet config keeps failCgroupV1 at its default"
else
  fail_cgroup_v1="# cgroup v1 host (/sys/fs/cgroup is $cgroup_fs): 1.35+ refuses it unless this is false.
failCgroupV1: false"
  step "cgroup v1 host (/sys/fs/cgroup is $cgroup_fs): kubelet config sets failCgroupV1: false (1.35+ refuses cgroup v1 otherwise)"
fi

# No clusterDNS on purpose: there is no DNS service, and pods must not send
# queries to an address that does not exist.
cat >"$ETC_DIR/kubelet-config.yaml" <<EOT
# Generated by kind/localnode/up.sh
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$CONTAINERD_ADDRESS
cgroupDriver: cgroupfs
$fail_cgroup_v1
failSwapOn: false
staticPodPath: $MANIFESTS_DIR
fileCheckFrequency: 5s
resolvConf: /etc/resolv.conf
rotateCertificates: false
serverTLSBootstrap: false
shutdownGracePeriod: 0s
serializeImagePulls: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI_DIR/ca.crt
authorization:
  mode: Webhook
# Never evict for a nearly full disk of a dev machine, never garbage-collect
# images: they were imported and cannot be pulled again.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOT

# Remember what the host looked like, so down.sh can put it back.
if [[ ! -f "$STATE_DIR/sysctl.orig" ]]; then
  for s in "${HOST_SYSCTLS[@]}"; do
    v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v"
  done >"$STATE_DIR/sysctl.orig"
fi
# /run/containerd/s: containerd 1.6 shims always put their sockets there.
for d in "$KUBELET_ROOT" /var/lib/cni /var/log/pods /var/log/containers /run/netns /run/containerd; do
  if [[ ! -e "$d" ]] && ! grep -qx "$d" "$STATE_DIR/created-dirs" 2>/dev/null; then
    echo "$d" >>"$STATE_DIR/created-dirs"
  fi
done
mkdir -p "$KUBELET_ROOT" "$LOCALNODE_RUNTIME"
if mountpoint -q "$KUBELET_ROOT"; then
  rm -f "$STATE_DIR/kubelet-root-not-mounted-before"
else
  touch "$STATE_DIR/kubelet-root-not-mounted-before"
fi

trap 'echo "up.sh failed: logs in $LOG_DIR; kind/localnode/down.sh cleans up" >&2' ERR

etcd_now=$(etcd_version "$(bin_path etcd)")
[[ -n "$etcd_now" ]] || die "$(bin_path etcd) does not print its version: rebuild it with kind/localnode/build.sh --force"
# Only this node's own data dirs (in its cache dir) are purged: the cluster state goes,
# the certificates and images stay; the kubelet registers the node again.
if [[ -e "$ETCD34_DATA" ]]; then
  step "etcd data in $ETCD34_DATA was written by Debian's etcd 3.4 (the local node's before it built its own); etcd $etcd_now cannot read it: purging it"
  rm -rf "$ETCD34_DATA"
fi
if [[ -e "$ETCD_DATA/member" ]] && ! why=$(etcd_data_readable "$etcd_now"); then
  step "etcd data in $ETCD_DATA was $why; etcd $etcd_now cannot read it: purging it"
  rm -rf "$ETCD_DATA" "$ETCD_VERSION_FILE"
fi
step "starting etcd $etcd_now"
mkdir -p "$ETCD_DATA"
chmod 700 "$ETCD_DATA"
start_daemon etcd --name localnode --data-dir "$ETCD_DATA" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster localnode=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
wait_daemon etcd 30 etcd_ok
echo "$etcd_now" >"$ETCD_VERSION_FILE"

step "starting containerd"
start_daemon containerd --config "$ETC_DIR/containerd.toml"
wait_daemon containerd 30 containerd_ok
"$here/load-image.sh" "$IMAGES_DIR/pause.tar" >/dev/null

step "starting kube-apiserver"
start_daemon kube-apiserver \
  --bind-address=127.0.0.1 --secure-port=6443 \
  --etcd-servers=http://127.0.0.1:2379 \
  --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
  --client-ca-file="$PKI_DIR/ca.crt" \
  --token-auth-file="$PKI_DIR/tokens.csv" \
  --requestheader-client-ca-file="$PKI_DIR/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$PKI_DIR/front-proxy-client.crt" \
  --proxy-client-key-file="$PKI_DIR/front-proxy-client.key" \
  --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=Hostname,InternalIP \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI_DIR/sa.pub" \
  --service-account-signing-key-file="$PKI_DIR/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --endpoint-reconciler-type=none \
  --cert-dir="$DATA_DIR/kube-apiserver-certs" \
  --profiling=false
wait_daemon kube-apiserver 90 apiserver_ok

step "starting kube-controller-manager and kube-scheduler"
# LOCALNODE_CONTROL_PLANE_QPS=N raises their API rate limits (QPS N, burst 2N)
# from the defaults (20/30 and 50/100), for thousands of simulated nodes
# (make bench-status-scale).
control_plane_qps=()
if [[ -n "${LOCALNODE_CONTROL_PLANE_QPS:-}" ]]; then
  [[ "$LOCALNODE_CONTROL_PLANE_QPS" =~ ^[1-9][0-9]*$ ]] ||
    die "LOCALNODE_CONTROL_PLANE_QPS=$LOCALNODE_CONTROL_PLANE_QPS: want a positive integer (API requests a second), e.g. 300"
  control_plane_qps=(--kube-api-qps="$LOCALNODE_CONTROL_PLANE_QPS" --kube-api-burst=$((2 * LOCALNODE_CONTROL_PLANE_QPS)))
fi
start_daemon kube-controller-manager \
  --kubeconfig="$PKI_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$PKI_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$PKI_DIR/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10257 \
  --cert-dir="$DATA_DIR/kube-controller-manager-certs" \
  --leader-elect=false \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$PKI_DIR/sa.key" \
  --root-ca-file="$PKI_DIR/ca.crt" \
  --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
  --cluster-name=localnode \
  --profiling=false ${control_plane_qps[@]+"${control_plane_qps[@]}"}
start_daemon kube-scheduler \
  --kubeconfig="$PKI_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig="$PKI_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig="$PKI_DIR/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10259 \
  --cert-dir="$DATA_DIR/kube-scheduler-certs" \
  --leader-elect=false \
  --profiling=false ${control_plane_qps[@]+"${control_plane_qps[@]}"}
wait_daemon kube-controller-manager 60 kcm_ok
wait_daemon kube-scheduler 60 scheduler_ok

step "starting kubelet (node $NODE_NAME) under kubelet-supervisor.sh (killed, it starts again)"
kubelet_since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
start_supervised_kubelet
wait_daemon kubelet 60 kubelet_ok
wait_daemon kubelet 120 node_ready "$kubelet_since"
# Pods are rejected until the ServiceAccount controller made the default account.
wait_daemon kube-controller-manager 60 k get serviceaccount default --namespace default
mark_node
trap - ERR
step "node $NODE_NAME Ready"
finish
