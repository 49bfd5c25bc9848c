package clusterstatus

// Rule is an RBAC rule the command uses. The ClusterRoles of manifests/
// and of the Helm chart grant exactly these (manifests_test.go checks it).
type Rule struct {
	Group    string   // API group, "" for the core group
	Resource string   // e.g. "pods", "nodes/proxy"
	Verbs    []string // e.g. list, watch
	// Optional rules only add reasons: without them those reasons are
	// reported as unknown (exit 3 when nothing else is wrong).
	Optional bool
}

// Rules are the permissions of `status`: one list (and, with -w, one watch)
// per kind; events for the reasons of nodes that are not registered; the
// proxies, optional, for the registrar's /readyz and the kubelet's metric.
var Rules = []Rule{
	{Group: "", Resource: "nodes", Verbs: []string{"list", "watch"}},
	{Group: "", Resource: "pods", Verbs: []string{"list", "watch"}},
	{Group: "", Resource: "events", Verbs: []string{"list"}},
	{Group: "apps", Resource: "daemonsets", Verbs: []string{"list", "watch"}},
	{Group: "storage.k8s.io", Resource: "csidrivers", Verbs: []string{"list", "watch"}},
	{Group: "storage.k8s.io", Resource: "csinodes", Verbs: []string{"list", "watch"}},
	{Group: "", Resource: "nodes/proxy", Verbs: []string{"get"}, Optional: true},
	{Group: "", Resource: "pods/proxy", Verbs: []string{"get"}, Optional: true},
}
