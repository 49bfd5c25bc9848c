//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recapT is a test that keeps what it reported as failed, to say it again
// after the diagnostics dumped when it ends: the tail of a long log (what a
// CI summary shows) then holds the cause, not only the cluster's events.
type recapT struct {
	*testing.T
	mu       sync.Mutex
	failures []string
}

// withRecap wraps t; when the test fails, its last cleanup prints each
// failure again.
func withRecap(t *testing.T) *recapT {
	r := &recapT{T: t}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		fmt.Printf("%s failed (%d failure(s), repeated after the diagnostics):\n", t.Name(), len(r.failures))
		for _, f := range r.failures {
			fmt.Printf("    %s\n", strings.ReplaceAll(f, "\n", "\n    "))
		}
	})
	return r
}

// diagnoseOnFailure prints the cluster's diagnostics when t has failed by
// the time its cleanups run (registered last, it runs before the others).
func diagnoseOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fmt.Println(cl.Diagnostics(ctx, allNodes))
	})
}

func (r *recapT) keep(msg string) {
	r.mu.Lock()
	r.failures = append(r.failures, msg)
	r.mu.Unlock()
}

func (r *recapT) Error(args ...any) {
	r.Helper()
	r.keep(fmt.Sprint(args...))
	r.T.Error(args...)
}

func (r *recapT) Errorf(format string, args ...any) {
	r.Helper()
	r.keep(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

func (r *recapT) Fatal(args ...any) {
	r.Helper()
	r.keep(fmt.Sprint(args...))
	r.T.Fatal(args...)
}

func (r *recapT) Fatalf(format string, args ...any) {
	r.Helper()
	r.keep(fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}
