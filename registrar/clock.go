package registrar

import "time"

// clock is the control loop's only source of time: the real clock in
// production, a fake one in the package's tests, which move time themselves
// instead of sleeping.
type clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers the time once, d from now.
	NewTimer(d time.Duration) timer
}

// timer is the part of *time.Timer the control loop uses.
type timer interface {
	C() <-chan time.Time
	Stop()
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop()               { t.t.Stop() }
