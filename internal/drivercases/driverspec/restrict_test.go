package driverspec

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func TestRestrictToAddsAHostnameAffinity(t *testing.T) {
	s := mustParse(t, upstreamStyle(t))
	msg, err := s.RestrictTo([]string{"node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "node-a") {
		t.Errorf("message %q does not name the node", msg)
	}
	y, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	for _, doc := range splitDocuments(y) {
		var d appsv1.DaemonSet
		if err := yaml.Unmarshal(doc, &d); err == nil && d.Kind == "DaemonSet" {
			ds = &d
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in the YAML")
	}
	terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != HostnameLabel ||
		strings.Join(terms[0].MatchExpressions[0].Values, ",") != "node-a" {
		t.Errorf("terms %+v, want one on %s In [node-a]", terms, HostnameLabel)
	}
}

func TestRestrictToRefusesAPodPinnedElsewhere(t *testing.T) {
	s := mustParse(t, upstreamStyle(t))
	for _, o := range s.Objects {
		if o["kind"] == "DaemonSet" {
			podSpecOf(o)["nodeName"] = "node-b"
		}
	}
	_, err := s.RestrictTo([]string{"node-a"})
	if err == nil || !strings.Contains(err.Error(), "pinned to node node-b") || !strings.Contains(err.Error(), "--node=node-b") {
		t.Errorf("err %v, want the pin named and the fix", err)
	}
}
