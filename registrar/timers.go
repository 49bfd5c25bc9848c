package registrar

import "time"

// backoff yields initial, 2×initial, … capped at max.
type backoff struct {
	initial, max, cur time.Duration
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max}
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.initial
	} else {
		b.cur *= 2
	}
	b.cur = min(b.cur, b.max)
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// alarm is a one-shot timer on a clock whose channel is nil while it is not
// armed, so it can sit in a select unconditionally.
type alarm struct {
	clk clock
	t   timer
}

func newAlarm(clk clock) alarm { return alarm{clk: clk} }

// set arms the alarm d from now, replacing any earlier setting.
func (a *alarm) set(d time.Duration) {
	a.stop()
	a.t = a.clk.NewTimer(d)
}

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}

// armed reports whether the alarm is set and has not been consumed.
func (a *alarm) armed() bool { return a.t != nil }

func (a *alarm) c() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C()
}
