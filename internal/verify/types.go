package verify

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Short names of the API types cleanup.go lists.
type (
	appsDaemonSet          = appsv1.DaemonSet
	appsStatefulSet        = appsv1.StatefulSet
	appsDeployment         = appsv1.Deployment
	corePod                = corev1.Pod
	coreServiceAccount     = corev1.ServiceAccount
	coreConfigMap          = corev1.ConfigMap
	coreService            = corev1.Service
	coreNamespace          = corev1.Namespace
	rbacRole               = rbacv1.Role
	rbacRoleBinding        = rbacv1.RoleBinding
	rbacClusterRole        = rbacv1.ClusterRole
	rbacClusterRoleBinding = rbacv1.ClusterRoleBinding
	storageCSIDriver       = storagev1.CSIDriver
	storageClass           = storagev1.StorageClass
)
