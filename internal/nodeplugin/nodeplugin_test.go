package nodeplugin

import (
	"os"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The repository's own node plugins are recognised from their manifests.
func TestRecognizeRepositoryManifests(t *testing.T) {
	for _, tc := range []struct {
		file       string
		containers []string
		hostPath   string
	}{
		{"../../manifests/base/daemonset.yaml", []string{"registrar"}, "/var/lib/kubelet/plugins_registry"},
		{"../../manifests/examples/upstream-style/node.yaml", []string{"node-driver-registrar"}, "/var/lib/kubelet/plugins_registry"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			var ds appsv1.DaemonSet
			if err := yaml.Unmarshal(b, &ds); err != nil {
				t.Fatal(err)
			}
			p, ok := RecognizeSpec(&ds.Spec.Template.Spec)
			if !ok {
				t.Fatalf("%s: not recognised as a node plugin", tc.file)
			}
			if !reflect.DeepEqual(p.Containers, tc.containers) || p.RegistryHostPath != tc.hostPath {
				t.Errorf("%s: got containers %v, host path %q; want %v, %q", tc.file, p.Containers, p.RegistryHostPath, tc.containers, tc.hostPath)
			}
			if p.KubeletRoot() != "/var/lib/kubelet" {
				t.Errorf("KubeletRoot() = %q", p.KubeletRoot())
			}
		})
	}
}

func hostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

func TestRecognizeSpec(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spec       corev1.PodSpec
		ok         bool
		hostPath   string
		containers []string
	}{
		{
			name: "non-default kubelet root",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{hostPathVolume("reg", "/var/snap/microk8s/common/var/lib/kubelet/plugins_registry/")},
				Containers: []corev1.Container{{Name: "registrar", VolumeMounts: []corev1.VolumeMount{{Name: "reg", MountPath: "/registration"}}}},
			},
			ok: true, hostPath: "/var/snap/microk8s/common/var/lib/kubelet/plugins_registry", containers: []string{"registrar"},
		},
		{
			name: "kubelet root mounted with subPath",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{hostPathVolume("kubelet", "/var/lib/kubelet")},
				Containers: []corev1.Container{{Name: "driver", VolumeMounts: []corev1.VolumeMount{{Name: "kubelet", MountPath: "/reg", SubPath: "plugins_registry"}}}},
			},
			ok: true, hostPath: "/var/lib/kubelet/plugins_registry", containers: []string{"driver"},
		},
		{
			name: "several containers, the driver first",
			spec: corev1.PodSpec{
				Volumes: []corev1.Volume{hostPathVolume("reg", "/var/lib/kubelet/plugins_registry"), hostPathVolume("plugin", "/var/lib/kubelet/plugins/x")},
				Containers: []corev1.Container{
					{Name: "provisioner", VolumeMounts: []corev1.VolumeMount{{Name: "plugin", MountPath: "/csi"}}},
					{Name: "driver", VolumeMounts: []corev1.VolumeMount{{Name: "plugin", MountPath: "/csi"}, {Name: "reg", MountPath: "/registration"}}},
					{Name: "registrar", VolumeMounts: []corev1.VolumeMount{{Name: "reg", MountPath: "/registration"}}},
				},
			},
			ok: true, hostPath: "/var/lib/kubelet/plugins_registry", containers: []string{"driver", "registrar"},
		},
		{
			name: "plugins directory only: a controller pod",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{hostPathVolume("plugin", "/var/lib/kubelet/plugins/x")},
				Containers: []corev1.Container{{Name: "provisioner", VolumeMounts: []corev1.VolumeMount{{Name: "plugin", MountPath: "/csi"}}}},
			},
		},
		{
			name: "declared but not mounted",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{hostPathVolume("reg", "/var/lib/kubelet/plugins_registry")},
				Containers: []corev1.Container{{Name: "app"}},
			},
		},
		{
			name: "an emptyDir named like it",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{{Name: "plugins_registry", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "plugins_registry", MountPath: "/var/lib/kubelet/plugins_registry"}}}},
			},
		},
		{
			name: "only an init container mounts it",
			spec: corev1.PodSpec{
				Volumes:        []corev1.Volume{hostPathVolume("reg", "/var/lib/kubelet/plugins_registry")},
				InitContainers: []corev1.Container{{Name: "cleanup", VolumeMounts: []corev1.VolumeMount{{Name: "reg", MountPath: "/r"}}}},
				Containers:     []corev1.Container{{Name: "app"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := RecognizeSpec(&tc.spec)
			if ok != tc.ok {
				t.Fatalf("recognised = %v, want %v (%+v)", ok, tc.ok, p)
			}
			if !ok {
				return
			}
			if p.RegistryHostPath != tc.hostPath || !reflect.DeepEqual(p.Containers, tc.containers) {
				t.Errorf("got host path %q, containers %v; want %q, %v", p.RegistryHostPath, p.Containers, tc.hostPath, tc.containers)
			}
		})
	}
}

func TestRecognizeOwner(t *testing.T) {
	isController := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{Kind: "StatefulSet", Name: "csi-hostpathplugin", Controller: &isController},
		}},
		Spec: corev1.PodSpec{
			Volumes:    []corev1.Volume{hostPathVolume("registration-dir", "/var/lib/kubelet/plugins_registry")},
			Containers: []corev1.Container{{Name: "node-driver-registrar", VolumeMounts: []corev1.VolumeMount{{Name: "registration-dir", MountPath: "/registration"}}}},
		},
	}
	p, ok := Recognize(pod)
	if !ok || p.Owner == nil || p.Owner.Kind != "StatefulSet" || p.Owner.Name != "csi-hostpathplugin" {
		t.Fatalf("Recognize = %+v, %v; want the StatefulSet as owner", p, ok)
	}
	if _, ok := Recognize(nil); ok {
		t.Error("a nil pod was recognised")
	}
}
