package registrar

import (
	"testing"
	"time"
)

// Two confirmations in the same millisecond (a restarted kubelet registers
// every socket concurrently) leave either endpoint stored: the newer
// instance must take the registration back on a tie, not only when the
// older one was confirmed strictly later.
func TestMayBeConfirmedAfter(t *testing.T) {
	for _, c := range []struct {
		other, self int64
		want        bool
	}{
		{other: 1001, self: 1000, want: true},
		{other: 1000, self: 1000, want: true}, // the tie kind/pluginmanager's TestKubeletRestart hit
		{other: 999, self: 1000, want: false},
		{other: 0, self: 0, want: false}, // never confirmed
		{other: 5, self: 0, want: true},
	} {
		got := mayBeConfirmedAfter(InstanceState{ConfirmedAt: c.other}, InstanceState{ConfirmedAt: c.self})
		if got != c.want {
			t.Errorf("mayBeConfirmedAfter(other confirmed at %d, self at %d) = %v, want %v", c.other, c.self, got, c.want)
		}
	}
}

// The node's boot time, read from /proc/stat, is a time in the past.
func TestReadBootTime(t *testing.T) {
	boot, err := readBootTime()
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); !boot.Before(now) || boot.Year() < 2000 {
		t.Errorf("boot time %s: want a time before now (%s) and after 2000", boot, now)
	}
}

// Only a standing-by instance the kubelet confirmed, not leaving, whose
// driver is ready is a fallback (/readyz 200): one whose driver is down or
// recovering, that was never confirmed, or that yields to a registrar
// without the mode holding the plain path, could not take the registration
// back at once, and one registered is ready by its own rule.
func TestIsFallback(t *testing.T) {
	confirmed := InstanceState{Confirmed: true}
	for _, c := range []struct {
		what    string
		stage   Stage
		self    InstanceState
		unready bool
		yielded bool
		want    bool
	}{
		{"standing by, confirmed, driver ready", StageStandingBy, confirmed, false, false, true},
		{"standing by, driver down or recovering", StageStandingBy, confirmed, true, false, false},
		{"standing by, yielded to a registrar without the mode", StageStandingBy, confirmed, false, true, false},
		{"standing by, never confirmed", StageStandingBy, InstanceState{}, false, false, false},
		{"standing by, terminating", StageStandingBy, InstanceState{Confirmed: true, Terminating: true}, false, false, false},
		{"registered", StageRegistered, confirmed, false, false, false},
		{"waiting for the kubelet", StageWaitingForKubelet, confirmed, false, false, false},
	} {
		if got := isFallback(c.stage, c.self, c.unready, c.yielded); got != c.want {
			t.Errorf("%s: isFallback = %v, want %v", c.what, got, c.want)
		}
	}
}
