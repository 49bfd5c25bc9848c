package clusterstatus

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Status reads the cluster once and answers. The options must have been
// validated. An error is returned only when ctx ends; what could not be
// read is in Report.Unknown.
func Status(ctx context.Context, client kubernetes.Interface, opts Options) (*Report, error) {
	snap, err := list(ctx, client, opts.Namespace)
	if err != nil {
		return nil, err
	}
	return answer(ctx, client, opts, snap), nil
}

// answer computes the report from a snapshot and asks the proxies about
// the nodes that are not registered.
func answer(ctx context.Context, client kubernetes.Interface, opts Options, snap *Snapshot) *Report {
	r, tasks := analyze(snap, opts.Driver)
	probe(ctx, client, opts, r, tasks)
	r.Time = time.Now().UTC().Truncate(time.Second)
	return r
}
