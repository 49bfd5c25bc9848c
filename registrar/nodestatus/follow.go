package nodestatus

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"time"
)

// The Reporter watches its own Node and its CSINode (one object each, by
// field selector) instead of polling them: a watch costs nothing while
// nothing changes, and tells of a change at once. Each stream is ended by
// the API server after watchTimeout (with jitter) and started again from
// a fresh GET.
const (
	watchTimeout = 5 * time.Minute
	maxBackoff   = time.Minute
)

// followNode sends each new state of the Node (nil: it does not exist).
func (r *Reporter) followNode(ctx context.Context, out chan *Node) {
	get := func() (*Node, string, error) {
		n, err := r.c.GetNode(ctx, r.opts.NodeName)
		if err != nil {
			return nil, "", err
		}
		return n, n.Metadata.ResourceVersion, nil
	}
	follow(ctx, r, nodesPath, get, out)
}

// followCSINode sends each new state of the CSINode (nil: it does not exist).
func (r *Reporter) followCSINode(ctx context.Context, out chan *CSINode) {
	get := func() (*CSINode, string, error) {
		n, err := r.c.GetCSINode(ctx, r.opts.NodeName)
		if err != nil {
			return nil, "", err
		}
		return n, n.Metadata.ResourceVersion, nil
	}
	follow(ctx, r, csinodesPath, get, out)
}

// follow gets the object, sends it, and watches it from its resource
// version, until ctx ends; after an error it waits a backoff (1 s doubling
// to 1 min) and starts again.
func follow[T any](ctx context.Context, r *Reporter, path string, get func() (*T, string, error), out chan *T) {
	failures := 0
	for ctx.Err() == nil {
		obj, rv, err := get()
		switch {
		case IsNotFound(err):
			obj, rv, err = nil, "", nil
		case err != nil:
			failures++
			wait(ctx, r, path, err, failures)
			continue
		}
		offer(out, obj)
		timeout := watchTimeout + rand.N(watchTimeout/5)
		err = r.c.watch(ctx, path, r.opts.NodeName, rv, timeout, func(typ string, raw json.RawMessage) error {
			switch typ {
			case "DELETED":
				offer(out, nil)
			case "ADDED", "MODIFIED":
				var o T
				if err := json.Unmarshal(raw, &o); err != nil {
					return err
				}
				offer(out, &o)
			}
			return nil
		})
		switch {
		case err == nil, statusOf(err) == http.StatusGone:
			failures = 0 // ended by the server, or too old: get again
		default:
			failures++
			wait(ctx, r, path, err, failures)
		}
	}
}

func wait(ctx context.Context, r *Reporter, path string, err error, failures int) {
	d := min(time.Second<<min(failures-1, 6), maxBackoff)
	r.log.Warn("watch failed; retrying", "path", path, "err", err, "retryIn", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// offer sends v on out, which has room for one, replacing a value not
// received yet: the receiver wants the latest state. follow is the only sender.
func offer[T any](out chan T, v T) {
	for {
		select {
		case out <- v:
			return
		default:
		}
		select {
		case <-out:
		default:
		}
	}
}
