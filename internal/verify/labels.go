package verify

const (
	// RunLabel marks every object verify creates; its value is the run.
	RunLabel = "verify.csi-registrar.io/run"
	// MarkerLabel (value "true") marks a node meant for disruptive tests:
	// kind/localnode/up.sh and kind/cluster/cluster.yaml set it. On nodes without it
	// verify needs --i-know-this-is-disruptive.
	MarkerLabel = "csi-registrar.io/test-node"
	// psaLabel is the Pod Security admission level of the run's namespace:
	// the node pod is privileged.
	psaLabel = "pod-security.kubernetes.io/enforce"
)
