#!/usr/bin/env bash
# Generate go.mod/go.sum/tools.go of the nested build module for one Kubernetes release
# (tools.go: a symlink to tools.go.in when it pins the same commands),
# in the folder named after its minor version (k8sbuild/1.37/ for v1.37.x).
#   ./gen-gomod.sh v1.37.2
# k8s.io/kubernetes is not meant to be imported: its go.mod replaces the k8s.io/*
# staging modules with ./staging paths. The nested module mirrors those replaces with
# the published v0.X.Y staging modules so the binaries build from the Go module proxy
# alone. That rule is internal/e2ebinary's (ModuleFile), which `kubectl csi-registrar
# storage-e2e` builds Kubernetes' e2e binary with too; gengomod/ writes the files with it.
# Only that folder changes; the project's root go.mod never sees Kubernetes.
# The newest folder is the local node's default version (env.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
exec go run ./kind/localnode/k8sbuild/gengomod "$@"
