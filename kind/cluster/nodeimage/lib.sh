# Helpers of kind/cluster/nodeimage/build.sh. Source after kind/lib.sh.
# shellcheck shell=bash

# The Debian packages of the node: what kind's base image installs (systemd,
# iptables, mount tools, jq for kind's OCI hook, ...) plus containerd, runc and
# the CNI plugins, which kind builds from source and Debian packages.
NODE_PACKAGES=(systemd systemd-sysv dbus conntrack iptables nftables iproute2 ethtool util-linux mount kmod
  libseccomp2 pigz bash ca-certificates curl jq procps containerd runc containernetworking-plugins socat)

# kind_k8s_env: K8S_VERSION, K8S_MINOR and LOCALNODE_BIN of the Kubernetes build the
# image is made of: the local node's parameter and default (K8S=1.34 … 1.37, newest
# by default, as kind/cluster/cluster.yaml's pinned kindest/node). Exits 2 on a version the
# local node does not build.
kind_k8s_env() {
  local vars
  vars=$(bash -c 'source "$1" && printf "K8S_VERSION=%q K8S_MINOR=%q LOCALNODE_BIN=%q\n" "$K8S_VERSION" "$K8S_MINOR" "$LOCALNODE_BIN"' _ "$REPO_ROOT/kind/localnode/env.sh") || exit 2
  eval "$vars"
}

# has_cap BIT: the capability is in this process's bounding set.
has_cap() {
  local bnd
  bnd=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  (((bnd >> $1) & 1))
}

# apt_sources: the host's apt source files, handed to mmdebstrap as they are.
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -s "$f" ]] && echo "$f"
  done
  return 0
}
base_suite() { . /etc/os-release && echo "$VERSION_CODENAME"; }
base_key() { echo "$(base_suite) ${NODE_PACKAGES[*]} $(apt_sources | xargs -r cat | sha256sum | cut -c1-12)" | sha256sum | cut -c1-16; }

# build_base: a minbase Debian root file system with NODE_PACKAGES as a tar,
# shared by all Kubernetes versions; prints its path.
build_base() {
  local out="$KIND_CACHE/base/$(base_suite)-$(base_key).tar" srcs
  if [[ ! -s "$out" ]]; then
    mapfile -t srcs < <(apt_sources)
    [[ ${#srcs[@]} -gt 0 ]] || die "no apt sources on this host (/etc/apt/sources.list[.d])"
    mkdir -p "$(dirname "$out")"
    step "  mmdebstrap $(base_suite) (first time: about 70 s)" >&2
    # (No dpkg path-excludes: with a tar output they run a filter per package, 10x slower;
    # node_rootfs drops man pages and docs instead.)
    mmdebstrap --quiet --variant=minbase --include="$(
      IFS=,
      echo "${NODE_PACKAGES[*]}"
    )" "$(base_suite)" "${out%.tar}.tmp.tar" "${srcs[@]}" >&2
    mv -f "${out%.tar}.tmp.tar" "$out"
  fi
  echo "$out"
}

# build_etcd VERSION CACHE: etcd (go.etcd.io/etcd/server/v3, which cannot be
# `go install`ed: its go.mod has replace directives) through a generated module.
build_etcd() {
  local v=$1 c=$2 d="$2/etcd-build"
  if [[ -x "$c/bin/etcd" && "$("$c/bin/etcd" --version 2>/dev/null | sed -n 's/^etcd Version: //p')" == "${v#v}" ]]; then return; fi
  rm -rf "$d" && mkdir -p "$d"
  printf 'module csi-registrar.local/etcd-build\n\ngo 1.24\n' >"$d/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\n' >"$d/tools.go"
  (cd "$d" && go get "go.etcd.io/etcd/server/v3@$v" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1 &&
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '-s -w' -o "$c/bin/etcd" go.etcd.io/etcd/server/v3) ||
    die "etcd $v did not build (in $d)"
}

# build_coredns VERSION CACHE: CoreDNS with `go install module@version`.
build_coredns() {
  local v=$1 c=$2
  if [[ -x "$c/bin/coredns" && "$("$c/bin/coredns" -version 2>/dev/null | head -n1)" == "CoreDNS-${v#v}" ]]; then return; fi
  step "  CoreDNS $v: first build takes about 4 min on 2 cores" >&2
  CGO_ENABLED=0 GOBIN="$c/bin" go install -trimpath -ldflags '-s -w' "github.com/coredns/coredns@$v" ||
    die "CoreDNS $v did not build"
}

# scratch_image REF BINARY PATH ENTRYPOINT: an image FROM scratch that holds the
# binary at PATH (and PATH in the environment), imported into the engine as REF.
scratch_image() {
  local ref=$1 bin=$2 path=$3 ep=$4 d
  d=$(mktemp -d "$work/image.XXXXXX")
  install -D -m 0755 "$bin" "$d$path"
  local changes=(-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
  [[ -z "$ep" ]] || changes+=(-c "ENTRYPOINT $ep")
  tar -C "$d" --numeric-owner --owner=0 --group=0 -cf - . | docker_cli import "${changes[@]}" - "$ref" >/dev/null
  rm -rf "$d"
}

# kube_proxy_image REF BINARY WRAPPER ROOTFS: kube-proxy with iptables (legacy and
# nft back ends: the xtables multi binaries, their extensions and the libraries
# they load, taken from the node's root file system, instead of a
# whole Debian). WRAPPER (iptables-wrapper/) stands in for the iptables names and
# picks the back end the node's kubelet uses, as the upstream image does.
kube_proxy_image() {
  local ref=$1 bin=$2 wrapper=$3 root=$4 d f xt
  d=$(mktemp -d "$work/image.XXXXXX")
  install -D -m 0755 "$bin" "$d/usr/local/bin/kube-proxy"
  install -D -m 0755 "$wrapper" "$d/usr/sbin/iptables-wrapper"
  xt=$(cd "$root" && ls -d usr/lib/*-linux-gnu/xtables)
  mkdir -p "$d/$xt"
  cp -a "$root/$xt/." "$d/$xt/"
  for f in /usr/sbin/xtables-legacy-multi /usr/sbin/xtables-nft-multi "/$xt"/*.so; do
    [[ "$f" == *.so ]] || install -D -m 0755 "$root$f" "$d$f"
    chroot "$root" ldd "$f" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
  done | sort -u | while read -r f; do
    mkdir -p "$d$(dirname "$f")"
    cp -L "$root$f" "$d$f"
  done
  for f in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -s iptables-wrapper "$d/usr/sbin/$f"
    ln -s xtables-legacy-multi "$d/usr/sbin/${f/tables/tables-legacy}"
    ln -s xtables-nft-multi "$d/usr/sbin/${f/tables/tables-nft}"
  done
  mkdir -p "$d/run" "$d/tmp" "$d/var/run"
  tar -C "$d" --numeric-owner --owner=0 --group=0 -cf - . |
    docker_cli import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$ref" >/dev/null
  rm -rf "$d"
}

# node_rootfs ROOT KIND_FILES K8S_BIN OOM_RESTRICT: what kind's base image and
# `kind build node-image` put on top of Debian.
node_rootfs() {
  local root=$1 files=$2 kbin=$3 oom=$4 f
  cp -r "$files/usr/local/bin/." "$root/usr/local/bin/"
  mkdir -p "$root/kind"
  cp -r "$files/kind/." "$root/kind/"
  cp -r "$files/etc/." "$root/etc/"
  chmod -R u+w,go+r "$root/usr/local/bin" "$root/kind" "$root/etc/containerd" "$root/etc/systemd/system" \
    "$root/etc/default" "$root/etc/sysctl.d" "$root/etc/crictl.yaml"
  chmod 0755 "$root"/usr/local/bin/* "$root/kind/bin" "$root"/kind/bin/*
  # kind's units start /usr/local/bin/containerd; Debian's is in /usr/bin.
  ln -sf /usr/bin/containerd "$root/usr/local/bin/containerd"
  ctr oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$root/etc/containerd/cri-base.json"
  if [[ "$oom" == true ]]; then
    sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$root/etc/containerd/config.toml"
    grep -q 'restrict_oom_score_adj = true' "$root/etc/containerd/config.toml" || die "kind's containerd config has no restrict_oom_score_adj"
  fi
  mkdir -p "$root/opt/cni/bin" "$root/etc/kubernetes/manifests" "$root/etc/cni/net.d"
  for f in "$root"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/${f##*/}" "$root/opt/cni/bin/${f##*/}"; done
  install -m 0755 "$kbin/kubeadm" "$kbin/kubelet" "$kbin/kubectl" "$root/usr/bin/"
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/*
  find "$root/usr/share/doc" -type f ! -name copyright -delete
  echo "$K8S_VERSION" >"$root/kind/version"
  # As kind's base image: no units but ours, no kmsg, no binfmt.
  find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
    "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
    "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$root/etc/systemd/journald.conf"
  chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  [[ -L "$root/etc/systemd/system/multi-user.target.wants/kubelet.service" ]] || die "systemctl enable kubelet in the node root failed"
}

# bake_images ROOT ARCHIVE: import the images into the node's containerd store
# (k8s.io namespace, not unpacked, as kind's node image builder does) with the
# host's containerd on a private socket, root in the node's /var/lib/containerd.
bake_images() {
  local root=$1 archive=$2 run pid i
  run=$(mktemp -d /run/csi-registrar-kind-bake.XXXXXX)
  cat >"$run/config.toml" <<EOT
version = 2
root = "$root/var/lib/containerd"
state = "$run/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$run/containerd.sock"
[ttrpc]
  address = "$run/containerd.sock.ttrpc"
EOT
  containerd --config "$run/config.toml" >"$run/containerd.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do
    ctr --address "$run/containerd.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  ctr --address "$run/containerd.sock" -n k8s.io images import --all-platforms --no-unpack --digests "$archive" >/dev/null ||
    { kill "$pid"; cat "$run/containerd.log" >&2; die "importing the images into the node's containerd store failed"; }
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  awk -v d="$run" '{ if (index($5, d "/") == 1) print $5 }' /proc/self/mountinfo | sort -r | xargs -r umount
  rm -rf "$run"
}
