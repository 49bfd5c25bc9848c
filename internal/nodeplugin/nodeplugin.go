// Package nodeplugin recognises the pods that run a CSI node plugin.
//
// A node plugin registers with the kubelet by creating a socket in the
// kubelet's plugin registration directory (<kubelet root>/plugins_registry),
// whoever creates it: csi-registrar, upstream node-driver-registrar, or a
// driver that registers in-process. To do that, its pod mounts that directory
// from the host. That mount is the one rule this package applies, so that the
// kubectl plugin and the e2e suites find the same pods for every registrar
// and every kubelet root (/var/lib/kubelet, /var/snap/microk8s/common/var/lib/kubelet,
// /var/lib/k0s/kubelet, ...).
//
// The package uses only the API types of k8s.io/api and the kubelet's facts
// of registrar/csiplugin; it makes no API calls.
package nodeplugin

import (
	"path"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Plugin is what a pod's spec tells about its node plugin.
type Plugin struct {
	// RegistryVolume is the name of the pod's hostPath volume that holds
	// the kubelet's plugin registration directory.
	RegistryVolume string
	// RegistryHostPath is that directory on the node, cleaned
	// (for example /var/lib/kubelet/plugins_registry).
	RegistryHostPath string
	// Containers are the names of the containers (init containers
	// excluded) that mount the directory, in the pod's order: the
	// registrar, or the driver when it registers in-process.
	Containers []string
	// Owner is the pod's controller (a DaemonSet, StatefulSet, ReplicaSet,
	// ...), or nil for a pod that has none.
	Owner *metav1.OwnerReference
}

// Recognize reports whether pod runs a node plugin, and what it mounts.
//
// A pod runs a node plugin when a container mounts, from a hostPath volume,
// a directory named plugins_registry: either the volume's path ends in it, or
// the volume is a parent directory mounted with that subPath.
func Recognize(pod *corev1.Pod) (Plugin, bool) {
	if pod == nil {
		return Plugin{}, false
	}
	p, ok := RecognizeSpec(&pod.Spec)
	if ok {
		p.Owner = metav1.GetControllerOf(pod)
	}
	return p, ok
}

// RecognizeSpec applies Recognize's rule to a pod spec, for example the
// template of a DaemonSet, StatefulSet or Deployment. Owner stays nil.
func RecognizeSpec(spec *corev1.PodSpec) (Plugin, bool) {
	if spec == nil {
		return Plugin{}, false
	}
	hostPaths := map[string]string{} // volume name -> cleaned host path
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path != "" {
			hostPaths[v.Name] = path.Clean(v.HostPath.Path)
		}
	}
	var p Plugin
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			hp, ok := hostPaths[m.Name]
			if !ok {
				continue
			}
			dir, ok := registryDir(hp, m.SubPath)
			if !ok {
				continue
			}
			if p.RegistryVolume == "" {
				p.RegistryVolume, p.RegistryHostPath = m.Name, dir
			}
			p.Containers = append(p.Containers, c.Name)
			break
		}
	}
	return p, len(p.Containers) > 0
}

// registryDir returns the registration directory that a mount of hostPath
// with subPath shows to a container, if it shows one.
func registryDir(hostPath, subPath string) (string, bool) {
	full := hostPath
	if subPath != "" {
		full = path.Join(hostPath, subPath)
	}
	if path.Base(full) == csiplugin.PluginsRegistryDir {
		return full, true
	}
	// A subPath inside plugins_registry (one socket's file, say) still
	// puts the container in the registration business.
	if i := strings.Index(full+"/", "/"+csiplugin.PluginsRegistryDir+"/"); i >= 0 {
		return full[:i+len(csiplugin.PluginsRegistryDir)+1], true
	}
	return "", false
}

// KubeletRoot returns the kubelet root directory on the node that
// p's registration directory belongs to (/var/lib/kubelet by default).
func (p Plugin) KubeletRoot() string {
	return path.Dir(p.RegistryHostPath)
}
