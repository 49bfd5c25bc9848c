package manifests

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// metricsObjects returns the Service and the PodMonitor a rendering holds
// (nil if absent), and its DaemonSet.
func metricsObjects(t *testing.T, objs []object) (svc *corev1.Service, podMonitor object, ds *appsv1.DaemonSet) {
	t.Helper()
	var rest []object
	for _, o := range objs {
		switch o["kind"] {
		case "Service":
			b, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			svc = &corev1.Service{}
			if err := yaml.UnmarshalStrict(b, svc); err != nil {
				t.Fatalf("%s: %v", o.key(), err)
			}
		case "PodMonitor":
			podMonitor = o
		default:
			rest = append(rest, o)
		}
	}
	_, _, dss := typed(t, rest)
	if len(dss) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(dss))
	}
	return svc, podMonitor, dss[0]
}

// metricsPort is the registrar's --http-endpoint port and the name of the
// container port that has that number.
func metricsPort(t *testing.T, ds *appsv1.DaemonSet) (int32, string) {
	t.Helper()
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "registrar" {
			continue
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--http-endpoint="); ok {
				_, port, _ := strings.Cut(v, ":")
				for _, p := range c.Ports {
					if fmt.Sprint(p.ContainerPort) == port {
						return p.ContainerPort, p.Name
					}
				}
				t.Fatalf("--http-endpoint=%s: no container port %s of the registrar", v, port)
			}
		}
	}
	t.Fatal("the registrar has no --http-endpoint")
	return 0, ""
}

// TestChartMetrics: the chart renders the metrics Service and PodMonitor
// only when asked, and both reach the registrar's /metrics: its
// --http-endpoint port on the DaemonSet's pods.
func TestChartMetrics(t *testing.T) {
	if svc, pm, _ := metricsObjects(t, helmTemplate(t, nil)); svc != nil || pm != nil {
		t.Errorf("the defaults render a Service (%v) or a PodMonitor (%v); want neither", svc != nil, pm != nil)
	}
	on := map[string]any{"metrics": map[string]any{
		"service":    map[string]any{"enabled": true},
		"podMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prometheus"}},
	}}
	svc, pm, ds := metricsObjects(t, helmTemplate(t, on))
	if svc == nil || pm == nil {
		t.Fatalf("with metrics.service.enabled and metrics.podMonitor.enabled: Service %v, PodMonitor %v; want both", svc != nil, pm != nil)
	}
	port, portName := metricsPort(t, ds)
	pods := ds.Spec.Template.Labels

	// The Service: headless, in the DaemonSet's namespace, selecting its pods, to the port.
	if svc.Namespace != ds.Namespace || svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s/%s clusterIP %q selector %v: want headless, in %s, with a selector", svc.Namespace, svc.Name, svc.Spec.ClusterIP, svc.Spec.Selector, ds.Namespace)
	}
	for k, v := range svc.Spec.Selector {
		if pods[k] != v {
			t.Errorf("Service selector %s=%s does not select the DaemonSet's pods (%v)", k, v, pods)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != port ||
		svc.Spec.Ports[0].TargetPort != intstr.FromString(portName) {
		t.Errorf("Service ports %+v: want metrics %d to the registrar's port %s", svc.Spec.Ports, port, portName)
	}
	if svc.Labels["app.kubernetes.io/instance"] != releaseName || svc.Labels["app.kubernetes.io/part-of"] != "csi-registrar" {
		t.Errorf("Service labels %v: want the recommended labels", svc.Labels)
	}

	// The PodMonitor, read as the Prometheus Operator's CRD defines it.
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			PodMetricsEndpoints []struct {
				Port     string `json:"port"`
				Path     string `json:"path"`
				Interval string `json:"interval"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	b, err := yaml.Marshal(pm)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("PodMonitor: %v\n%s", err, b)
	}
	if m.APIVersion != "monitoring.coreos.com/v1" || m.Metadata.Namespace != ds.Namespace || m.Metadata.Labels["release"] != "prometheus" ||
		m.Metadata.Labels["app.kubernetes.io/instance"] != releaseName {
		t.Errorf("PodMonitor %s %s/%s labels %v: want monitoring.coreos.com/v1 in %s with the recommended labels and release=prometheus",
			m.APIVersion, m.Metadata.Namespace, m.Metadata.Name, m.Metadata.Labels, ds.Namespace)
	}
	if len(m.Spec.Selector.MatchLabels) == 0 || len(m.Spec.NamespaceSelector.MatchNames) != 1 || m.Spec.NamespaceSelector.MatchNames[0] != ds.Namespace {
		t.Errorf("PodMonitor selects %v in %v: want the DaemonSet's pods in %s", m.Spec.Selector.MatchLabels, m.Spec.NamespaceSelector.MatchNames, ds.Namespace)
	}
	for k, v := range m.Spec.Selector.MatchLabels {
		if pods[k] != v {
			t.Errorf("PodMonitor selector %s=%s does not select the DaemonSet's pods (%v)", k, v, pods)
		}
	}
	if e := m.Spec.PodMetricsEndpoints; len(e) != 1 || e[0].Port != portName || e[0].Path != "/metrics" || e[0].Interval != "15s" {
		t.Errorf("PodMonitor endpoints %+v: want port %s, path /metrics, interval 15s", e, portName)
	}

	// Each alone.
	for _, which := range []string{"service", "podMonitor"} {
		svc, pm, _ := metricsObjects(t, helmTemplate(t, map[string]any{"metrics": map[string]any{which: map[string]any{"enabled": true}}}))
		if (svc != nil) != (which == "service") || (pm != nil) != (which == "podMonitor") {
			t.Errorf("only metrics.%s.enabled: Service %v, PodMonitor %v", which, svc != nil, pm != nil)
		}
	}
}
