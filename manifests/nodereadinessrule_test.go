package manifests

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// nodeReadinessRule is the part of the Node Readiness Controller's
// NodeReadinessRule (readiness.node.x-k8s.io/v1alpha1) the example sets.
type nodeReadinessRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Conditions []struct {
			Type           string `json:"type"`
			RequiredStatus string `json:"requiredStatus"`
		} `json:"conditions"`
		EnforcementMode string       `json:"enforcementMode"`
		Taint           corev1.Taint `json:"taint"`
		NodeSelector    struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"nodeSelector"`
	} `json:"spec"`
}

// The controller's CRD (v0.5.0) refuses a taint key whose name part is not
// 1 to 63 of these characters.
var ruleTaintName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// TestNodeReadinessControllerRule: examples/node-readiness-controller's rule
// gates on the condition the node-readiness component's registrar writes,
// with a taint key the controller accepts, on the nodes the node plugin runs
// on; the node plugin (kustomize and chart) and the suite's controller
// (kind/e2e/testdata/node-readiness-controller) tolerate the taint.
func TestNodeReadinessControllerRule(t *testing.T) {
	objs := kustomize(t, filepath.Join("examples", "node-readiness-controller"))
	if len(objs) != 1 {
		t.Fatalf("want one object, got %d", len(objs))
	}
	var rule nodeReadinessRule
	b, _ := yaml.Marshal(objs[0])
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatal(err)
	}
	if rule.APIVersion != "readiness.node.x-k8s.io/v1alpha1" || rule.Kind != "NodeReadinessRule" {
		t.Fatalf("%s %s, want readiness.node.x-k8s.io/v1alpha1 NodeReadinessRule", rule.APIVersion, rule.Kind)
	}
	if rule.Spec.EnforcementMode != "continuous" {
		t.Errorf("enforcementMode %q, want continuous", rule.Spec.EnforcementMode)
	}
	key := rule.Spec.Taint.Key
	prefix, name, _ := strings.Cut(key, "/")
	if prefix != "readiness.k8s.io" || strings.Count(key, "/") != 1 || len(name) < 1 || len(name) > 63 || !ruleTaintName.MatchString(name) {
		t.Errorf("taint key %q: the controller wants readiness.k8s.io/<name>, name 1-63 characters of [-A-Za-z0-9_.], alphanumeric at both ends", key)
	}
	if rule.Spec.Taint.Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taint effect %q, want NoSchedule (NoExecute would evict the running pods whenever the condition is not True)", rule.Spec.Taint.Effect)
	}

	for name, objs := range map[string][]object{
		"kubectl kustomize overlays/node-readiness":      kustomize(t, filepath.Join("overlays", "node-readiness")),
		"helm template --set nodeReadiness.enabled=true": helmTemplate(t, map[string]any{"nodeReadiness": map[string]any{"enabled": true}}),
	} {
		ds := daemonSetOf(t, objs)
		spec := ds.Spec.Template.Spec
		var condition string
		for _, c := range spec.Containers {
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--node-condition="); ok {
					condition = v
				}
			}
		}
		if len(rule.Spec.Conditions) != 1 || rule.Spec.Conditions[0].Type != condition || rule.Spec.Conditions[0].RequiredStatus != "True" {
			t.Errorf("%s: the registrar writes --node-condition=%s; the rule requires %+v", name, condition, rule.Spec.Conditions)
		}
		if !tolerates(spec.Tolerations, rule.Spec.Taint) {
			t.Errorf("%s: the node plugin does not tolerate %s: it could not start on a tainted node", name, key)
		}
		for k, v := range rule.Spec.NodeSelector.MatchLabels {
			if spec.NodeSelector[k] != v {
				t.Errorf("%s: the rule selects %s=%s, the node plugin runs on %v: a node could be tainted that it never runs on", name, k, v, spec.NodeSelector)
			}
		}
	}

	for _, o := range kustomize(t, filepath.Join("..", "kind", "e2e", "testdata", "node-readiness-controller")) {
		if o["kind"] != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		b, _ := yaml.Marshal(o)
		if err := yaml.UnmarshalStrict(b, &d); err != nil {
			t.Fatal(err)
		}
		if !tolerates(d.Spec.Template.Spec.Tolerations, rule.Spec.Taint) {
			t.Errorf("the controller's Deployment does not tolerate %s: restarted on a tainted node, it could not start", key)
		}
	}
}

func daemonSetOf(t *testing.T, objs []object) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range objs {
		if o["kind"] != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		b, _ := yaml.Marshal(o)
		if err := yaml.UnmarshalStrict(b, &ds); err != nil {
			t.Fatal(err)
		}
		return &ds
	}
	t.Fatal("no DaemonSet")
	return nil
}

// tolerates: one of tols tolerates taint, by the scheduler's rule for the
// operators Exists and Equal.
func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	for _, tl := range tols {
		if tl.Effect != "" && tl.Effect != taint.Effect {
			continue
		}
		switch tl.Operator {
		case corev1.TolerationOpExists:
			if tl.Key == "" || tl.Key == taint.Key {
				return true
			}
		case "", corev1.TolerationOpEqual:
			if tl.Key == taint.Key && tl.Value == taint.Value {
				return true
			}
		}
	}
	return false
}
