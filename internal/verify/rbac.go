package verify

import (
	"context"
	"fmt"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// needs is what verify needs of the API, besides what applying and deleting
// the driver's own manifests needs (kubectl apply/delete -f them).
func needs() []authv1.ResourceAttributes {
	return []authv1.ResourceAttributes{
		{Verb: "create", Resource: "namespaces"},
		{Verb: "delete", Resource: "namespaces"},
		{Verb: "create", Resource: "pods"},
		{Verb: "delete", Resource: "pods"},
		{Verb: "create", Resource: "pods", Subresource: "exec"},
		{Verb: "list", Resource: "nodes"},
		{Verb: "watch", Resource: "nodes"},
		{Verb: "watch", Resource: "csinodes", Group: "storage.k8s.io"},
		{Verb: "watch", Resource: "pods"},
		{Verb: "list", Resource: "pods"}, // every namespace: a volume left on a node is one whose pod is gone
		{Verb: "get", Resource: "pods", Subresource: "log"},
		{Verb: "list", Resource: "events"},
	}
}

// NeedsText says what Needs are, for --help.
const NeedsText = `Needs: create/delete namespaces; create/delete pods and create pods/exec (a privileged node
pod, hostPID and the host's root, in a namespace of its own labelled
pod-security.kubernetes.io/enforce=privileged: admission must allow that level there); list/watch
nodes, csinodes, pods; get pods/log; list events; and whatever applying and deleting the driver's
manifests needs (kubectl apply/delete -f, as cluster-admin would).`

// missingRBAC asks the API server (SelfSubjectAccessReview) for each need
// and returns those it denies.
func missingRBAC(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	var out []string
	for _, n := range needs() {
		ra := n
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask the API server what this user may do (SelfSubjectAccessReview): %w", err)
		}
		if !r.Status.Allowed {
			what := n.Resource
			if n.Subresource != "" {
				what += "/" + n.Subresource
			}
			out = append(out, fmt.Sprintf("this user may not %s %s: verify needs it (grant it, or run with a cluster-admin context)", n.Verb, what))
		}
	}
	return out, nil
}
