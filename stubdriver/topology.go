package stubdriver

import (
	"fmt"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// ParseTopology turns "key=value" arguments (the repeatable --topology flag)
// into a topology map, refusing duplicate keys and invalid labels.
func ParseTopology(args []string) (map[string]string, error) {
	topo := make(map[string]string, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, &csiplugin.ValidationError{What: "--topology", Value: a, Rule: "must be key=value",
				Fix: "e.g. --topology=topology.stub.csi.example.com/zone=zone-a"}
		}
		if _, dup := topo[k]; dup {
			return nil, &csiplugin.ValidationError{What: "--topology", Value: a, Rule: fmt.Sprintf("key %q is given twice", k),
				Fix: "give each topology key once"}
		}
		if err := validateTopology(k, v); err != nil {
			return nil, err
		}
		topo[k] = v
	}
	return topo, nil
}

// validateTopology checks a topology segment as the kubelet will write it: a
// valid Kubernetes label key and value, and a key the kubelet may set under
// the NodeRestriction admission plugin (not under kubernetes.io or k8s.io).
func validateTopology(key, value string) error {
	seg := key + "=" + value
	bad := func(rule, fix string) error {
		return &csiplugin.ValidationError{What: "topology segment", Value: seg, Rule: rule, Fix: fix}
	}
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix {
		if prefix == "" || len(prefix) > 253 || !csiplugin.IsDNSSubdomain(prefix) {
			return bad("the key's prefix must be a DNS subdomain of at most 253 characters", "use a prefix such as topology.example.com/")
		}
		for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
			if (prefix == reserved || strings.HasSuffix(prefix, "."+reserved)) && !isKubeletLabel(prefix, key) {
				return bad("keys under "+reserved+"/ cannot be set by the kubelet (NodeRestriction admission), "+
					"except kubelet labels such as topology.kubernetes.io/zone and keys under node.kubernetes.io/",
					"use your driver's own prefix, e.g. topology.<driver-name>/zone")
			}
		}
	}
	if !isLabelName(name) {
		return bad("the key's name must be 1-63 characters, alphanumeric at both ends, with '-', '_', '.' between",
			"e.g. zone")
	}
	if value != "" && !isLabelName(value) {
		return bad("the value must be at most 63 characters, alphanumeric at both ends, with '-', '_', '.' between",
			"e.g. zone-a")
	}
	return nil
}

// kubeletLabels are the keys under kubernetes.io that NodeRestriction lets a
// kubelet set on its own Node. This mirrors IsKubeletLabel in
// k8s.io/kubelet/pkg/apis, which is not imported because it pulls in k8s.io/api.
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname":                   true,
	"topology.kubernetes.io/zone":              true,
	"topology.kubernetes.io/region":            true,
	"failure-domain.beta.kubernetes.io/zone":   true,
	"failure-domain.beta.kubernetes.io/region": true,
	"beta.kubernetes.io/instance-type":         true,
	"node.kubernetes.io/instance-type":         true,
	"kubernetes.io/os":                         true,
	"kubernetes.io/arch":                       true,
	"beta.kubernetes.io/os":                    true,
	"beta.kubernetes.io/arch":                  true,
}

// isKubeletLabel reports whether the kubelet may set the label key (whose
// prefix is given): a key listed above, or one under [*.]kubelet.kubernetes.io/
// or [*.]node.kubernetes.io/.
func isKubeletLabel(prefix, key string) bool {
	if kubeletLabels[key] {
		return true
	}
	for _, ns := range []string{"kubelet.kubernetes.io", "node.kubernetes.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return true
		}
	}
	return false
}

// isLabelName reports whether s is a valid label name or non-empty value.
func isLabelName(s string) bool {
	if s == "" || len(s) > 63 || !csiplugin.IsAlnum(s[0]) || !csiplugin.IsAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !csiplugin.IsAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}
