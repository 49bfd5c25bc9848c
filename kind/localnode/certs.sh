#!/usr/bin/env bash
# Generate the local node's CA, serving/client certificates, service-account key pair,
# static tokens and kubeconfigs with openssl. Everything is for 127.0.0.1 only.
# Skips when they exist for the current node name; --force regenerates.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
source "$here/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
source "$here/lib.sh"

complete() {
  local f
  for f in ca.crt apiserver.crt apiserver-kubelet-client.crt front-proxy-ca.crt front-proxy-client.crt \
    sa.key sa.pub tokens.csv admin.kubeconfig controller-manager.kubeconfig scheduler.kubeconfig \
    kubelet.kubeconfig; do
    [[ -s "$PKI_DIR/$f" ]] || return 1
  done
  [[ -s "$PKI_DIR/.node-name" && "$(<"$PKI_DIR/.node-name")" == "$NODE_NAME" ]]
}
if [[ "${1:-}" != --force ]] && complete; then
  exit 0
fi

rm -rf "$PKI_DIR"
mkdir -p "$PKI_DIR"
chmod 700 "$PKI_DIR"
cd "$PKI_DIR"
days=3650

newkey() { openssl genrsa -out "$1.key" 2048 2>/dev/null; }
# sign NAME SUBJECT EXTENSIONS: a certificate for NAME.key signed by the CA ($ca, default ca).
sign() {
  local ca=${ca:-ca}
  printf '%s\n' "$3" >"$1.ext"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  openssl x509 -req -in "$1.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days "$days" \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

newkey ca
openssl req -x509 -new -key ca.key -subj "/CN=csi-registrar-localnode-ca" -days "$days" -out ca.crt

newkey apiserver
sign apiserver "/CN=kube-apiserver" "$(printf '%s\n' \
  "subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1" \
  "keyUsage=critical,digitalSignature,keyEncipherment" \
  "extendedKeyUsage=serverAuth")"

# Client certificate the apiserver presents to the kubelet (logs, exec, port-forward).
newkey apiserver-kubelet-client
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" \
  "$(printf '%s\n' "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=clientAuth")"

# Front-proxy (request header) CA and client: without them kube-controller-manager and
# kube-scheduler log "missing content for CA bundle ... requestheader-client-ca-file"
# every few seconds.
newkey front-proxy-ca
openssl req -x509 -new -key front-proxy-ca.key -subj "/CN=csi-registrar-localnode-front-proxy-ca" \
  -days "$days" -out front-proxy-ca.crt
newkey front-proxy-client
ca=front-proxy-ca sign front-proxy-client "/CN=front-proxy-client" \
  "$(printf '%s\n' "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=clientAuth")"

# Service-account token signing key pair.
newkey sa
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

# Static bearer tokens: user, uid, groups. The names are the ones the bootstrap RBAC
# policy and the Node authorizer know.
tok() { openssl rand -hex 24; }
admin_tok=$(tok) kcm_tok=$(tok) sched_tok=$(tok) node_tok=$(tok)
cat >tokens.csv <<EOT
$admin_tok,localnode-admin,localnode-admin,"system:masters"
$kcm_tok,system:kube-controller-manager,system:kube-controller-manager
$sched_tok,system:kube-scheduler,system:kube-scheduler
$node_tok,system:node:$NODE_NAME,system:node:$NODE_NAME,"system:nodes"
EOT

ca_data=$(base64 -w0 <ca.crt)
kubeconfig() { # FILE USER TOKEN
  cat >"$1" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: localnode
  cluster:
    server: $APISERVER
    certificate-authority-data: $ca_data
users:
- name: $2
  user:
    token: $3
contexts:
- name: localnode
  context:
    cluster: localnode
    user: $2
current-context: localnode
EOT
}
kubeconfig admin.kubeconfig localnode-admin "$admin_tok"
kubeconfig controller-manager.kubeconfig system:kube-controller-manager "$kcm_tok"
kubeconfig scheduler.kubeconfig system:kube-scheduler "$sched_tok"
kubeconfig kubelet.kubeconfig "system:node:$NODE_NAME" "$node_tok"
chmod 600 ./*.key ./*.kubeconfig tokens.csv
echo "$NODE_NAME" >.node-name
echo "certs: generated in $PKI_DIR"
