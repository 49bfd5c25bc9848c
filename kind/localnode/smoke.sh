#!/usr/bin/env bash
# Smoke test of a running local node (after up.sh):
#  - an image built FROM scratch (the pause binary under another name) is loaded with
#    load-image.sh and a privileged DaemonSet using it, with a hostPath on
#    /var/lib/kubelet/plugins_registry, gets a Running pod;
#  - deleting the namespace completes (namespace + garbage-collector controllers).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

ns=localnode-smoke
img=localhost/csi-registrar/localnode-smoke:1
node_ready "" 2>/dev/null || die "node $NODE_NAME is not Ready: run kind/localnode/up.sh"
trap 'k delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true' ERR

step "image $img"
"$here/images/build-pause.sh" "$img" "$IMAGES_DIR/smoke.tar" >/dev/null
"$here/load-image.sh" "$IMAGES_DIR/smoke.tar" >/dev/null

step "DaemonSet in namespace $ns"
k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
k apply -f - >/dev/null <<EOT
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: smoke
  namespace: $ns
spec:
  selector:
    matchLabels: {app: smoke}
  template:
    metadata:
      labels: {app: smoke}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: smoke
        image: $img
        imagePullPolicy: Never
        securityContext: {privileged: true}
        volumeMounts:
        - {name: registry, mountPath: /registration}
      volumes:
      - name: registry
        hostPath: {path: /var/lib/kubelet/plugins_registry, type: DirectoryOrCreate}
EOT
k rollout status daemonset/smoke -n "$ns" --timeout=90s >/dev/null
pod_running() { [[ "$(k get pods -n "$ns" -l app=smoke -o 'jsonpath={.items[0].status.phase}')" == Running ]]; }
wait_for 60 pod_running || die "DaemonSet pod not Running: $(k get pods -n "$ns" -o wide 2>&1)"
k get pods -n "$ns" -o wide
step "DaemonSet pod Running"

k delete namespace "$ns" --timeout=120s >/dev/null
ns_gone() { ! k get namespace "$ns" >/dev/null 2>&1; }
wait_for 120 ns_gone || die "namespace $ns not deleted: $(k get namespace "$ns" -o yaml 2>&1 | tail -20)"
step "namespace $ns deleted"
echo "smoke: 2 passed, 0 failed"
