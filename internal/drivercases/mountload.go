package drivercases

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// MountLoad starts pods with a CSI inline volume, round robin over Nodes,
// one every Every until stopped, and deletes each once it runs (its volume
// was mounted): during a rollout both the old and the new driver instance
// publish and unpublish, and the nodes' pod capacity is never reached.
// verify's rollout cases and the e2e suite's rollout test share it.
type MountLoad struct {
	Client    kubernetes.Interface
	Namespace string // the load's own: DeleteAll deletes every pod in it
	Nodes     []string
	Every     time.Duration
	// Pod returns the pod to create, named name, on node.
	Pod func(name, node string) *corev1.Pod

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	pods   map[string]*LoadPod // by name
	err    error
}

// LoadPod is a pod a MountLoad created.
type LoadPod struct {
	Node string
	UID  types.UID
	Ran  bool // seen Running (and then deleted)
}

// Start creates the pods in a goroutine that Stop ends.
func (l *MountLoad) Start(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	l.cancel, l.done = cancel, make(chan struct{})
	l.mu.Lock()
	if l.pods == nil {
		l.pods = map[string]*LoadPod{}
	}
	l.mu.Unlock()
	go func() {
		defer close(l.done)
		tick := time.NewTicker(l.Every)
		defer tick.Stop()
		for i := 0; ; i++ {
			n := l.Nodes[i%len(l.Nodes)]
			name := fmt.Sprintf("inline-%04d", i)
			made, err := l.Client.CoreV1().Pods(l.Namespace).Create(wctx, l.Pod(name, n), metav1.CreateOptions{})
			if err == nil {
				l.mu.Lock()
				l.pods[name] = &LoadPod{Node: n, UID: made.UID}
				l.mu.Unlock()
				err = l.Reap(wctx)
			}
			if err != nil {
				if wctx.Err() == nil {
					l.mu.Lock()
					l.err = err
					l.mu.Unlock()
				}
				return
			}
			select {
			case <-tick.C:
			case <-wctx.Done():
				return
			}
		}
	}()
}

// Stop ends the load (it may be called more than once, and before Start)
// and returns the error that ended it early, if any.
func (l *MountLoad) Stop() error {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Reap deletes the pods that run, and records that they ran.
func (l *MountLoad) Reap(ctx context.Context) error {
	return l.deletePods(ctx, func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false
		}
		l.mu.Lock()
		if lp := l.pods[p.Name]; lp != nil {
			lp.Ran = true
		}
		l.mu.Unlock()
		return true
	})
}

// AwaitRan reaps until every pod created ran or timeout passes, and
// returns those that never ran, sorted.
func (l *MountLoad) AwaitRan(ctx context.Context, timeout time.Duration) (never []string, err error) {
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := l.Reap(ctx); err != nil {
			return false, err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		never = never[:0]
		for name, p := range l.pods {
			if !p.Ran {
				never = append(never, name)
			}
		}
		return len(never) == 0, nil
	})
	sort.Strings(never)
	return never, err
}

// Pods returns a copy of the pods created, by name.
func (l *MountLoad) Pods() map[string]LoadPod {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]LoadPod, len(l.pods))
	for name, p := range l.pods {
		out[name] = *p
	}
	return out
}

// DeleteAll deletes every pod of the namespace at once (no grace period).
func (l *MountLoad) DeleteAll(ctx context.Context) error {
	return l.deletePods(ctx, func(*corev1.Pod) bool { return true })
}

// deletePods deletes, with no grace period, the pods of the namespace that
// pick chooses.
func (l *MountLoad) deletePods(ctx context.Context, pick func(*corev1.Pod) bool) error {
	pods := l.Client.CoreV1().Pods(l.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	grace := int64(0)
	for i := range list.Items {
		p := &list.Items[i]
		if !pick(p) {
			continue
		}
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// AwaitNoPods waits until no pod is left in the namespace.
func (l *MountLoad) AwaitNoPods(ctx context.Context, timeout time.Duration) error {
	var left int
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := l.Client.CoreV1().Pods(l.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d inline-volume pods in %s not gone within %s: %w", left, l.Namespace, timeout, err)
	}
	return nil
}
