// Package record watches Kubernetes objects and keeps every event with the
// time it arrived, so that a check can ask whether a state that lasted a
// moment was seen (an entry gone and back within one kubelet loop), and what
// the state was after each change. The driver cases and the e2e suites use
// it to judge by what the API server says.
package record

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// State is every watched object after an event, by name (pods: by UID).
type State map[string]runtime.Object

// Node returns the watched Node (nil if absent).
func (s State) Node(name string) *corev1.Node {
	n, _ := s[name].(*corev1.Node)
	return n
}

// CSINode returns the watched CSINode (nil if absent).
func (s State) CSINode(name string) *storagev1.CSINode {
	n, _ := s[name].(*storagev1.CSINode)
	return n
}

// Pods returns the watched pods.
func (s State) Pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range s {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// Pod returns the watched pod with that UID (nil if absent).
func (s State) Pod(uid string) *corev1.Pod {
	p, _ := s[uid].(*corev1.Pod)
	return p
}

// Event is one change seen by a Recorder, with the state after it. The first
// event of a Recorder (Type Initial) is the state listed when it started.
type Event struct {
	At    time.Time
	Type  watch.EventType
	Obj   runtime.Object
	State State
}

// Initial is the Type of a Recorder's first Event.
const Initial watch.EventType = "INITIAL"

// Recorder lists objects, then watches them from that list's resourceVersion
// and keeps every event with its arrival time, so that states that last a
// moment (an entry gone and back within one kubelet loop) are seen: the API
// server sends every change, and the watch resumes from the last version seen
// after a disconnect. Start it before the action it observes.
type Recorder struct {
	what   string
	keyOf  func(metav1.Object) string
	mu     sync.Mutex
	events []Event
	wake   chan struct{} // closed and replaced on every new event
	err    error         // the watch ended
	cancel context.CancelFunc
}

// ListFunc lists the objects a Recorder starts from.
type ListFunc func(ctx context.Context) (runtime.Object, error)

// WatchFunc watches them from a resourceVersion.
type WatchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

// Start lists the objects, records that list as the Initial event, and
// watches from its resourceVersion until ctx ends or Stop is called.
func Start(ctx context.Context, what string, keyOf func(metav1.Object) string, list ListFunc, watchFn WatchFunc) (*Recorder, error) {
	l, err := list(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: list: %w", what, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(l)
	if err != nil {
		return nil, err
	}
	r := &Recorder{what: what, keyOf: keyOf, wake: make(chan struct{})}
	st := State{}
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			return nil, err
		}
		st[keyOf(m)] = it
	}
	r.events = append(r.events, Event{At: time.Now(), Type: Initial, State: st})
	wctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	rw, err := watchtools.NewRetryWatcherWithContext(wctx, lm.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return watchFn(ctx, o) },
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go r.loop(wctx, rw)
	return r, nil
}

func (r *Recorder) loop(ctx context.Context, rw *watchtools.RetryWatcher) {
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			r.finish(ctx.Err())
			return
		case ev, ok := <-rw.ResultChan():
			if !ok {
				r.finish(fmt.Errorf("%s: watch closed", r.what))
				return
			}
			at := time.Now()
			switch ev.Type {
			case watch.Bookmark:
				continue
			case watch.Error:
				r.finish(fmt.Errorf("%s: watch error: %v", r.what, ev.Object))
				return
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			r.mu.Lock()
			st := maps.Clone(r.events[len(r.events)-1].State)
			if ev.Type == watch.Deleted {
				delete(st, r.keyOf(m))
			} else {
				st[r.keyOf(m)] = ev.Object
			}
			r.events = append(r.events, Event{At: at, Type: ev.Type, Obj: ev.Object, State: st})
			close(r.wake)
			r.wake = make(chan struct{})
			r.mu.Unlock()
		}
	}
}

func (r *Recorder) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// Stop ends the watch; the goroutine Start began returns.
func (r *Recorder) Stop() { r.cancel() }

// Err is why the watch ended (nil while it runs): a watch that had to
// relist, or closed, may have missed a state.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Len is the number of events so far; use it as a position for Await and All.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// Events returns a copy of the events from position from.
func (r *Recorder) Events(from int) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from > len(r.events) {
		return nil
	}
	return append([]Event(nil), r.events[from:]...)
}

// Await waits until an event at position from or later leaves a state that
// satisfies cond, and returns its position and the event. It gives up after
// timeout, when ctx ends, or when the watch ended.
func (r *Recorder) Await(ctx context.Context, from int, timeout time.Duration, what string, cond func(State) bool) (int, Event, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i := from; ; {
		r.mu.Lock()
		for ; i < len(r.events); i++ {
			if cond(r.events[i].State) {
				ev := r.events[i]
				r.mu.Unlock()
				return i, ev, nil
			}
		}
		wake, werr := r.wake, r.err
		r.mu.Unlock()
		if werr != nil {
			return 0, Event{}, fmt.Errorf("%s: %s: %w", r.what, what, werr)
		}
		select {
		case <-wake:
		case <-deadline.C:
			return 0, Event{}, fmt.Errorf("%s: %s: not seen within %s (%d events)", r.what, what, timeout, r.Len())
		case <-ctx.Done():
			return 0, Event{}, fmt.Errorf("%s: %s: %w", r.what, what, ctx.Err())
		}
	}
}

// All checks cond on the state after every event from position from to the
// last one so far; it returns the first event that violates it, or nil.
func (r *Recorder) All(from int, cond func(State) bool) *Event {
	for _, ev := range r.Events(from) {
		if !cond(ev.State) {
			return &ev
		}
	}
	return nil
}

// NameKey keys objects by name (cluster-scoped objects, one namespace).
func NameKey(m metav1.Object) string { return m.GetName() }

// UIDKey keys objects by UID (pods, which are replaced under new names).
func UIDKey(m metav1.Object) string { return string(m.GetUID()) }
