package registrar

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when a test advances it, so that a
// test drives the control loop's timers (backoffs, KubeletWait, the
// reconcile tick) without sleeping. Timers fire on Advance, as time.Timer
// does, into a channel of capacity 1.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{} // armed, not fired, not stopped
	changed chan struct{}           // closed and replaced when a timer is armed
}

type fakeTimer struct {
	clk *fakeClock
	at  time.Time
	d   time.Duration
	c   chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), timers: map[*fakeTimer]struct{}{},
		changed: make(chan struct{})}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clk: f, at: f.now.Add(d), d: d, c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.timers[t] = struct{}{}
	close(f.changed)
	f.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	delete(t.clk.timers, t)
}

// Advance moves the clock by d and fires every timer that is due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for t := range f.timers {
		if !t.at.After(f.now) {
			delete(f.timers, t)
			t.c <- t.at
		}
	}
}

// WaitForTimer waits (in real time, up to patience) until a timer of
// duration d is armed, and returns how far it is from now.
func (f *fakeClock) WaitForTimer(t testing.TB, d time.Duration, patience time.Duration) time.Duration {
	t.Helper()
	deadline := time.After(patience)
	for {
		f.mu.Lock()
		changed := f.changed
		for tm := range f.timers {
			if tm.d == d {
				left := tm.at.Sub(f.now)
				f.mu.Unlock()
				return left
			}
		}
		f.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no timer of %s was armed within %s", d, patience)
			return 0
		}
	}
}

// Fire waits until a timer of duration d is armed and advances the clock to
// its deadline.
func (f *fakeClock) Fire(t testing.TB, d time.Duration, patience time.Duration) {
	t.Helper()
	f.Advance(f.WaitForTimer(t, d, patience))
}

// FireUntil advances the clock to each timer of one of the durations ds as
// it is armed, until done is closed: an instance of the rolling-update mode
// that leaves at a test's end waits successorWait on the clock; a driver
// look that failed is tried again after a backoff.
func (f *fakeClock) FireUntil(t testing.TB, done <-chan struct{}, patience time.Duration, ds ...time.Duration) {
	t.Helper()
	deadline := time.After(patience)
	for {
		f.mu.Lock()
		changed := f.changed
		var due *fakeTimer
		for tm := range f.timers {
			if slices.Contains(ds, tm.d) {
				due = tm
			}
		}
		f.mu.Unlock()
		if due != nil {
			f.Advance(due.at.Sub(f.Now()))
		}
		select {
		case <-done:
			return
		case <-changed:
		case <-deadline:
			t.Errorf("not done within %s", patience)
			return
		}
	}
}

// WaitForTimers waits (in real time, up to patience) until n timers of
// duration d are armed: each instance of the rolling-update mode re-arms
// its Probe alarm when it fires, and an Advance before that would leave it
// unfired.
func (f *fakeClock) WaitForTimers(t testing.TB, d time.Duration, n int, patience time.Duration) {
	t.Helper()
	deadline := time.After(patience)
	for {
		f.mu.Lock()
		changed, got := f.changed, 0
		for tm := range f.timers {
			if tm.d == d {
				got++
			}
		}
		f.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d timers of %s were not armed within %s (%d were)", n, d, patience, got)
			return
		}
	}
}
