#!/usr/bin/env bash
# Write k8s-<minor>.mod and k8s-<minor>.sum: this module's go.mod for the kubelet
# code of one supported Kubernetes minor, which `make test-pluginmanager` selects
# with `go test -modfile=k8s-<minor>.mod -tags k8s_<minor with _>`.
#   ./gen-modfile.sh 1.34
#   ./gen-modfile.sh 1.38.0-beta.0   a pre-release pinned by the local node
#                                    (k8sbuild/pre-1.38.0-beta.0/): k8s-1.38.mod
# k8s.io/kubernetes and its staging modules take the pins of the local node's
# build module for that minor (kind/localnode/k8sbuild/<minor>/go.mod: its
# require of k8s.io/kubernetes and its replace block, copied as they are); every
# other module is what Go's version selection makes of those and of this module's
# own requirements (the root module's are a floor), except the CSI spec: the
# kubelet's CSI client of 1.34-1.36 compiles only against the spec its build
# module pins (v1.13.0 dropped fields it uses), so that pin replaces the
# root module's (csi-registrar uses only calls every spec version has). The newest minor is go.mod itself:
# regenerate it with `./gen-modfile.sh <newest> && mv k8s-<newest>.mod go.mod && mv k8s-<newest>.sum go.sum`.
# TestKubeletPins checks each file against the build module.
set -euo pipefail
cd "$(dirname "$0")"
minor=${1:?usage: gen-modfile.sh <minor, e.g. 1.34, or a pinned pre-release, e.g. 1.38.0-beta.0>}
src=../localnode/k8sbuild/$minor/go.mod
if [[ $minor =~ ^(1\.[0-9]+)\.[0-9]+-(alpha|beta|rc)\.[0-9]+$ ]]; then
	src=../localnode/k8sbuild/pre-$minor/go.mod
	minor=${BASH_REMATCH[1]}
fi
[ -f "$src" ] || { echo "no build module for Kubernetes $minor: $src is missing (the supported minors are the folders of kind/localnode/k8sbuild)" >&2; exit 2; }
k8s=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3} $1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$src" | head -1)
[ -n "$k8s" ] || { echo "$src requires no k8s.io/kubernetes version" >&2; exit 2; }
staging=v0.${k8s#v1.}
out=k8s-$minor.mod
# This module's go.mod without its replace block of the staging modules …
awk '/^replace \($/ {skip=1} skip && /^\)$/ {skip=0; next} !skip' go.mod >"$out"
# … and the build module's, as it is.
echo >>"$out"
awk '/^replace \($/ {on=1} on {print} on && /^\)$/ {on=0}' "$src" >>"$out"
csispec=$(awk '$1=="github.com/container-storage-interface/spec" {print $2}' "$src" | head -1)
[ -n "$csispec" ] && echo "replace github.com/container-storage-interface/spec => github.com/container-storage-interface/spec $csispec" >>"$out"
cp go.sum "k8s-$minor.sum"
# A release whose go line is newer than the local Go names its toolchain in its build
# module (`toolchain go1.27.4`): the go commands on this file use it (GOTOOLCHAIN).
toolchain=$(awk '$1=="toolchain" {print $2}' "$src")
if [ -n "$toolchain" ]; then
	echo "toolchain $toolchain" >>"$out"
	export GOTOOLCHAIN=$toolchain
fi
go mod edit -modfile="$out" -require=k8s.io/kubernetes@"$k8s" \
	-require=k8s.io/api@"$staging" -require=k8s.io/apimachinery@"$staging" -require=k8s.io/client-go@"$staging"
# A pre-release: its own tests may import modules the proxy does not serve (k8s.io/ktesting of
# v1.38.0-beta.0): -e keeps what resolves, the build of this module fails on what it needs.
tidy=()
[[ $src != */pre-* ]] || tidy=(-e)
go mod tidy "${tidy[@]}" -modfile="$out"
echo "$out: k8s.io/kubernetes $k8s, staging modules $staging"
