//go:build tools

// Package k8sbuild only pins the Kubernetes packages this module builds
// (kubeadm and kube-proxy for the kind node image: build.sh --with-kind;
// test/e2e for the storage e2e test binary: kind/storage/build-e2e.sh)
// and etcd's server at the version Kubernetes pins (build.sh).
package k8sbuild

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e"
)
