package registrar

import "github.com/fsnotify/fsnotify"

// What the black-box tests (package registrar_test) need from inside.

// FakeClock is the test clock (fakeclock_test.go).
type FakeClock = fakeClock

// NewFakeClock returns a fake clock at a fixed time.
func NewFakeClock() *FakeClock { return newFakeClock() }

// UseClock makes the Registrar's control loop run on clk. Call it before Run.
func (r *Registrar) UseClock(clk *FakeClock) { r.clock = clk }

// OnWatcher hands the test the file watcher Run creates, once Run created it,
// so that a test can lose events (Remove a watch) or report a watcher error
// as the kernel would (an inotify queue overflow).
func (r *Registrar) OnWatcher(f func(*fsnotify.Watcher)) {
	r.newWatcher = func() (*fsnotify.Watcher, error) {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			f(w)
		}
		return w, err
	}
}

// Periods of the control loop, for tests that drive the clock.
const (
	ReconcilePeriod     = reconcilePeriod
	KubeletRetrySilence = kubeletRetrySilence
	KubeletSettle       = kubeletSettle
)

// ListenFault returns the stage and the metric reason of a listen error.
func ListenFault(err error) (Stage, string) {
	kind, stage := listenFault(err)
	return stage, string(kind)
}
