package driverspec

import (
	"fmt"
	"slices"
)

// HostnameLabel is the node label the scheduler matches node names by.
const HostnameLabel = "kubernetes.io/hostname"

// RestrictTo keeps the node plugin workload's pods on nodes: it adds a
// required node affinity term on kubernetes.io/hostname to its pod template
// (to every term already there, which must all hold too). A pod pinned by
// spec.nodeName to another node is an error. It returns what it changed,
// for the log.
func (s *Spec) RestrictTo(nodes []string) (string, error) {
	if len(nodes) == 0 {
		return "", fmt.Errorf("no node to restrict %s to", s.Workload)
	}
	for _, o := range s.Objects {
		if o["kind"] != s.Workload.Kind || name(o) != s.Workload.Name {
			continue
		}
		pod := podSpecOf(o)
		if pod == nil {
			return "", fmt.Errorf("%s has no pod template", s.Workload)
		}
		if n, _ := pod["nodeName"].(string); n != "" && !slices.Contains(nodes, n) {
			return "", fmt.Errorf("%s is pinned to node %s by spec.nodeName, not one of %v: pick that node (--node=%s)", s.Workload, n, nodes, n)
		}
		values := make([]any, len(nodes))
		for i, n := range nodes {
			values[i] = n
		}
		expr := map[string]any{"key": HostnameLabel, "operator": "In", "values": values}
		aff := child(pod, "affinity")
		na := child(aff, "nodeAffinity")
		req := child(na, "requiredDuringSchedulingIgnoredDuringExecution")
		terms, _ := req["nodeSelectorTerms"].([]any)
		if len(terms) == 0 {
			terms = []any{map[string]any{}}
		}
		for _, t := range terms {
			term, _ := t.(map[string]any)
			if term == nil {
				return "", fmt.Errorf("%s: a nodeSelectorTerm is not an object", s.Workload)
			}
			exprs, _ := term["matchExpressions"].([]any)
			term["matchExpressions"] = append(exprs, expr)
		}
		req["nodeSelectorTerms"] = terms
		return fmt.Sprintf("%s: pods kept on %v (required node affinity %s In %v added)", s.Workload, nodes, HostnameLabel, nodes), nil
	}
	return "", fmt.Errorf("the objects hold no %s", s.Workload)
}

func name(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// child returns m[key] as an object, creating it when absent.
func child(m map[string]any, key string) map[string]any {
	c, _ := m[key].(map[string]any)
	if c == nil {
		c = map[string]any{}
		m[key] = c
	}
	return c
}
