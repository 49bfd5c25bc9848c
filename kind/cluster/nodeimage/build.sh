#!/usr/bin/env bash
# make kind-node-image: a kind node image built here, with no container registry.
#   [K8S=1.34|1.35|1.36|1.37] bash kind/cluster/nodeimage/build.sh   (newest by default, as the local node)
# Prints the image reference as its last line. Pieces, each cached under
# $KIND_CACHE/<Kubernetes version>/ (a second build with nothing changed takes seconds):
#   Debian base          mmdebstrap from the host's apt sources (lib.sh build_base)
#   kind's node files    images/base/files of sigs.k8s.io/kind in the module cache (go.mod's version)
#   Kubernetes           kind/localnode/build.sh --with-kind: the local node's build, same cache
#   etcd, CoreDNS        built from the Go module proxy at the versions kubeadm asks for
#   pause                kind/localnode/images/pause (Go)
#   iptables-wrapper     kind/cluster/nodeimage/iptables-wrapper (Go): kube-proxy's iptables back end
#   images               FROM-scratch images of those binaries, a slim kube-proxy (its
#                        binary, iptables and their libraries), imported into the node's
#                        containerd store with the host's containerd (no container needed)
# The engine is the caller's Docker, else the private dockerd (kind/cluster/dockerd/dockerd.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../lib.sh
source "$here/../../lib.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"

kind_k8s_env
cache="$KIND_CACHE/$K8S_VERSION"
mkdir -p "$cache/bin"
# shellcheck source=../../buildlock.sh
source "$here/../../buildlock.sh"
hold_build_lock "$cache/build.lock" "node image" "$K8S_VERSION" || true

install_debs mmdebstrap containerd jq
# A private dockerd this build starts is stopped again at its end (kind/cluster/cluster.sh
# starts it first when it calls this, and keeps it).
work="" stop_engine=false
cleanup() {
  [[ -z "$work" ]] || rm -rf "$work"
  if $stop_engine; then bash "$REPO_ROOT/kind/cluster/dockerd/dockerd.sh" stop >&2; fi
}
trap cleanup EXIT
if ! user_docker_answers && ! bash "$REPO_ROOT/kind/cluster/dockerd/dockerd.sh" status; then stop_engine=true; fi
use_engine >&2

step "node image $K8S_VERSION: Kubernetes binaries (kind/localnode/build.sh --with-kind)"
[[ -x "$LOCALNODE_BIN/kubeadm" ]] ||
  step "  first build of Kubernetes $K8S_VERSION: about 13 min on 2 cores (about 1 min when the local node's build of it is there)"
K8S=$K8S_MINOR bash "$REPO_ROOT/kind/localnode/build.sh" --with-kind </dev/null | sed 's/^/  /' >&2
KBIN="$LOCALNODE_BIN"

kind_version=$(cd "$REPO_ROOT" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
kind_dir=$(cd "$REPO_ROOT" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
[[ -d "$kind_dir/images/base/files" ]] || (cd "$REPO_ROOT" && go mod download sigs.k8s.io/kind)
kind_dir=$(cd "$REPO_ROOT" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)

# The images kubeadm of this release asks for, and the sandbox image of kind's containerd config.
mapfile -t kubeadm_images < <("$KBIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION")
image_ref() { printf '%s\n' "${kubeadm_images[@]}" | grep -E "/$1:" | head -n1; }
kind_pause=$(sed -nE 's/^[[:space:]]*sandbox_image = "(.*)"/\1/p' "$kind_dir/images/base/files/etc/containerd/config.toml")
etcd_version=v$(image_ref etcd | sed -E 's/.*:([0-9.]+)(-[0-9]+)?$/\1/')
coredns_version=$(image_ref coredns | sed -E 's/.*:(v[0-9.]+)$/\1/')

# restrict_oom_score_adj: without CAP_SYS_RESOURCE runc cannot lower a pod's
# oom_score_adj (every sandbox fails); detected from this host's bounding set.
oom_restrict=false
if ! has_cap 24; then oom_restrict=true; fi

stamp=$( {
  echo "$K8S_VERSION $(cat "$KBIN/.stamp") kind $kind_version etcd $etcd_version coredns $coredns_version"
  echo "oom_restrict $oom_restrict base $(base_key)"
  cat "$here"/*.sh "$here"/iptables-wrapper/*.go "$REPO_ROOT/kind/localnode/images/pause/main.go"
} | sha256sum | cut -c1-16)
image="csi-registrar/kind-node:$K8S_VERSION"
if [[ "$(docker_cli image inspect -f '{{index .Config.Labels "csi-registrar.stamp"}}' "$image" 2>/dev/null)" == "$stamp" ]]; then
  step "node image $image is current (stamp $stamp)"
  echo "$image"
  exit 0
fi
step "node image $image: building (cold: about 6 min on 2 cores: etcd 1 min, CoreDNS 4 min, Debian base 1 min)"

step "etcd $etcd_version and CoreDNS $coredns_version (Go module proxy)"
build_etcd "$etcd_version" "$cache"
build_coredns "$coredns_version" "$cache"
(cd "$REPO_ROOT/kind/localnode/images/pause" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' -o "$cache/bin/pause" .)
(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' -o "$cache/bin/iptables-wrapper" ./kind/cluster/nodeimage/iptables-wrapper)

step "Debian base (mmdebstrap; cached)"
base=$(build_base)

work="$cache/work"
rm -rf "$work" && mkdir -p "$work"
root="$work/rootfs"
mkdir "$root"
tar -C "$root" -xf "$base"

step "component images (FROM scratch; kube-proxy slim)"
refs=()
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  scratch_image "$(image_ref "$c")" "$KBIN/$c" "/usr/local/bin/$c" ""
  refs+=("$(image_ref "$c")")
done
scratch_image "$(image_ref etcd)" "$cache/bin/etcd" /usr/local/bin/etcd ""
refs+=("$(image_ref etcd)")
scratch_image "$(image_ref coredns)" "$cache/bin/coredns" /coredns '["/coredns"]'
refs+=("$(image_ref coredns)")
scratch_image "$(image_ref pause)" "$cache/bin/pause" /pause '["/pause"]'
refs+=("$(image_ref pause)")
if [[ "$kind_pause" != "$(image_ref pause)" ]]; then
  docker_cli tag "$(image_ref pause)" "$kind_pause"
  refs+=("$kind_pause")
fi
kube_proxy_image "$(image_ref kube-proxy)" "$KBIN/kube-proxy" "$cache/bin/iptables-wrapper" "$root"
refs+=("$(image_ref kube-proxy)")
docker_cli save -o "$work/images.tar" "${refs[@]}"

step "node root filesystem (kind $kind_version files, kubeadm/kubelet/kubectl, containerd store)"
node_rootfs "$root" "$kind_dir/images/base/files" "$KBIN" "$oom_restrict"
bake_images "$root" "$work/images.tar"

step "importing the node image into the engine"
tar -C "$root" --numeric-owner -cf - . | docker_cli import \
  -c 'ENV container=docker' \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  -c "LABEL csi-registrar.stamp=$stamp" \
  -c "LABEL csi-registrar.kubernetes=$K8S_VERSION" \
  - "$image" >/dev/null
docker_cli rmi "${refs[@]}" >/dev/null 2>&1 || true
step "node image $image built ($(docker_cli image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'))"
echo "$image"
