package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

type objectKind string

const (
	kindPod       objectKind = "pod"
	kindNamespace objectKind = "namespace"
	kindManifests objectKind = "manifests" // name: the file applied
)

type object struct {
	kind            objectKind
	namespace, name string
}

func (o object) String() string {
	switch o.kind {
	case kindManifests:
		return "the objects of " + o.name
	case kindNamespace:
		return "namespace " + o.name
	}
	return fmt.Sprintf("%s %s/%s", o.kind, o.namespace, o.name)
}

// tracker remembers what this run created and not yet removed, so that an
// interrupted run (SIGINT, SIGTERM, an error) removes exactly that.
type tracker struct {
	client  kubernetes.Interface
	kubectl drivercases.Kubectl
	mu      sync.Mutex
	made    []object
}

func (t *tracker) add(k objectKind, ns, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.made = append(t.made, object{k, ns, name})
}

func (t *tracker) remove(k objectKind, ns, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.made = slices.DeleteFunc(t.made, func(o object) bool { return o == object{k, ns, name} })
}

// removeAll deletes what is left, newest first (the manifests' objects and
// the node pods before the namespace), and reports what it removed.
func (t *tracker) removeAll(ctx context.Context) ([]string, error) {
	t.mu.Lock()
	left := slices.Clone(t.made)
	t.mu.Unlock()
	var done []string
	var errs []error
	for i := len(left) - 1; i >= 0; i-- {
		o := left[i]
		var err error
		switch o.kind {
		case kindManifests:
			_, err = t.kubectl(ctx, "delete", "-f", o.name, "--ignore-not-found", "--wait=true", "--timeout=180s")
		case kindPod:
			err = t.client.CoreV1().Pods(o.namespace).Delete(ctx, o.name, metav1.DeleteOptions{})
		case kindNamespace:
			err = t.client.CoreV1().Namespaces().Delete(ctx, o.name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", o, err))
			continue
		}
		t.remove(o.kind, o.namespace, o.name)
		done = append(done, o.String())
	}
	return done, errors.Join(errs...)
}
