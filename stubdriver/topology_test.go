package stubdriver_test

import (
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

func TestParseTopology(t *testing.T) {
	// A DNS subdomain of exactly 253 characters: three labels of 63, one of 61.
	prefix253 := strings.Repeat(strings.Repeat("p", 63)+".", 3) + strings.Repeat("p", 61)
	// 254 characters, every label still at most 63.
	prefix254 := strings.Repeat(strings.Repeat("p", 63)+".", 3) + strings.Repeat("p", 62)
	if len(prefix253) != 253 || len(prefix254) != 254 {
		t.Fatalf("prefixes have %d and %d characters", len(prefix253), len(prefix254))
	}
	ok := []struct {
		name string
		args []string
		want map[string]string
	}{
		{"no arguments", nil, map[string]string{}},
		{"prefix/name=value", []string{"topology.stub.csi.example.com/zone=zone-a"},
			map[string]string{"topology.stub.csi.example.com/zone": "zone-a"}},
		{"name only", []string{"zone=a"}, map[string]string{"zone": "a"}},
		{"empty value", []string{"topology.stub.csi.example.com/zone="},
			map[string]string{"topology.stub.csi.example.com/zone": ""}},
		{"several keys", []string{"example.com/zone=z1", "example.com/rack=r_1.A"},
			map[string]string{"example.com/zone": "z1", "example.com/rack": "r_1.A"}},
		{"63-character name and value", []string{"example.com/" + strings.Repeat("n", 63) + "=" + strings.Repeat("v", 63)},
			map[string]string{"example.com/" + strings.Repeat("n", 63): strings.Repeat("v", 63)}},
		{"253-character prefix", []string{prefix253 + "/zone=a"}, map[string]string{prefix253 + "/zone": "a"}},
		// Keys the kubelet may set under NodeRestriction (k8s.io/kubelet/pkg/apis.IsKubeletLabel).
		{"topology.kubernetes.io/zone", []string{"topology.kubernetes.io/zone=eu-west-1a"},
			map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"}},
		{"topology.kubernetes.io/region", []string{"topology.kubernetes.io/region=eu-west-1"},
			map[string]string{"topology.kubernetes.io/region": "eu-west-1"}},
		{"node.kubernetes.io namespace", []string{"stub.node.kubernetes.io/rack=r1"},
			map[string]string{"stub.node.kubernetes.io/rack": "r1"}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stubdriver.ParseTopology(tc.args)
			if err != nil {
				t.Fatalf("ParseTopology(%q): %v", tc.args, err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("ParseTopology(%q) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}

	bad := []struct {
		name  string
		args  []string
		value string // the argument or segment the error must quote
		rule  string // a part of the rule the error must state
	}{
		{"missing '='", []string{"zone"}, "zone", "must be key=value"},
		{"duplicate key", []string{"zone=a", "zone=b"}, "zone=b", `key "zone" is given twice`},
		{"duplicate key and value", []string{"zone=a", "zone=a"}, "zone=a", `key "zone" is given twice`},
		{"empty key", []string{"=a"}, "=a", "the key's name must be"},
		{"empty prefix", []string{"/zone=a"}, "/zone=a", "the key's prefix must be a DNS subdomain"},
		{"key under kubernetes.io/", []string{"kubernetes.io/zone=a"}, "kubernetes.io/zone=a",
			"keys under kubernetes.io/ cannot be set by the kubelet"},
		{"key under sub.kubernetes.io/", []string{"topology.kubernetes.io/rack=a"}, "topology.kubernetes.io/rack=a",
			"keys under kubernetes.io/ cannot be set by the kubelet"},
		{"key under node-restriction.kubernetes.io/", []string{"node-restriction.kubernetes.io/zone=a"},
			"node-restriction.kubernetes.io/zone=a", "keys under kubernetes.io/ cannot be set by the kubelet"},
		{"key under k8s.io/", []string{"k8s.io/zone=a"}, "k8s.io/zone=a", "keys under k8s.io/ cannot be set by the kubelet"},
		{"key under sub.k8s.io/", []string{"topology.k8s.io/zone=a"}, "topology.k8s.io/zone=a",
			"keys under k8s.io/ cannot be set by the kubelet"},
		{"uppercase prefix", []string{"Example.com/zone=a"}, "Example.com/zone=a", "the key's prefix must be a DNS subdomain"},
		{"254-character prefix", []string{prefix254 + "/zone=a"}, prefix254 + "/zone=a",
			"the key's prefix must be a DNS subdomain of at most 253 characters"},
		{"prefix label of 64", []string{strings.Repeat("p", 64) + ".com/zone=a"}, strings.Repeat("p", 64) + ".com/zone=a",
			"the key's prefix must be a DNS subdomain"},
		{"prefix with underscore", []string{"ex_ample.com/zone=a"}, "ex_ample.com/zone=a", "the key's prefix must be a DNS subdomain"},
		{"64-character name", []string{"example.com/" + strings.Repeat("n", 64) + "=a"},
			"example.com/" + strings.Repeat("n", 64) + "=a", "the key's name must be 1-63 characters"},
		{"name with a space", []string{"example.com/zo ne=a"}, "example.com/zo ne=a", "the key's name must be"},
		{"name with a second '/'", []string{"example.com/zone/x=a"}, "example.com/zone/x=a", "the key's name must be"},
		{"name starting with '-'", []string{"-zone=a"}, "-zone=a", "alphanumeric at both ends"},
		{"empty name after prefix", []string{"example.com/=a"}, "example.com/=a", "the key's name must be"},
		{"64-character value", []string{"zone=" + strings.Repeat("v", 64)}, "zone=" + strings.Repeat("v", 64),
			"the value must be at most 63 characters"},
		{"value with a space", []string{"zone=zone a"}, "zone=zone a", "the value must be"},
		{"value ending in '.'", []string{"zone=a."}, "zone=a.", "alphanumeric at both ends"},
		{"value with '='", []string{"zone=a=b"}, "zone=a=b", "the value must be"},
		{"value with a newline", []string{"zone=a\nb"}, "zone=a\nb", "the value must be"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stubdriver.ParseTopology(tc.args)
			if err == nil {
				t.Fatalf("ParseTopology(%q) = %v, want an error", tc.args, got)
			}
			if got != nil {
				t.Errorf("ParseTopology(%q) returned %v with its error", tc.args, got)
			}
			ve := asValidationError(t, err)
			if ve.Value != tc.value {
				t.Errorf("ValidationError.Value = %q, want %q", ve.Value, tc.value)
			}
			if !strings.Contains(ve.Rule, tc.rule) {
				t.Errorf("ValidationError.Rule = %q, want it to contain %q", ve.Rule, tc.rule)
			}
			if msg := err.Error(); !strings.Contains(msg, strconv.Quote(tc.value)) || ve.Fix == "" {
				t.Errorf("message %q does not quote %q or says nothing about how to fix it", msg, tc.value)
			}
		})
	}
}
