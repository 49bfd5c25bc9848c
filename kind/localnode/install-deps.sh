#!/usr/bin/env bash
# Install Debian packages before their first use: with no argument, those the local
# single-node Kubernetes needs; with arguments, just those (e.g. `install-deps.sh buildah`
# before `make image` on a machine without a Docker engine).
# Idempotent: when every package is already installed it does not touch apt at all.
set -euo pipefail

NODE_PKGS=(
  containerd runc             # container runtime (ctr comes with containerd)
  containernetworking-plugins # bridge/host-local/portmap/loopback CNI plugins in /usr/lib/cni
  buildah                     # builds FROM-scratch images without a Docker engine
  iptables conntrack          # bridge CNI (ipMasq/portmap) and kubelet need them
  iproute2 util-linux         # ip, mount/umount, findmnt (down.sh)
  openssl curl ca-certificates
)
if [[ $# -gt 0 ]]; then PKGS=("$@"); else PKGS=("${NODE_PKGS[@]}"); fi

missing=()
for p in "${PKGS[@]}"; do
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present (${PKGS[*]})"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: need root to install: ${missing[*]} (or install them yourself: apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
