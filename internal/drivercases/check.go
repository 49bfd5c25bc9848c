package drivercases

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
)

// check is one case as it runs: what testing.T is to a test. Fatalf and
// Skipf end the case (by a panic that runCase recovers); Errorf marks it
// failed and goes on. Cleanups run in reverse order when the case ends.
type check struct {
	name     string
	parent   context.Context // the run's context: the case's derives from it
	out      io.Writer
	failed   bool
	skipped  bool
	cleanups []func()
	times    []report.CaseTime
	// Set by a case for its result: a verdict other than pass (verdict
	// "measured"; FAIL and skip come from Errorf and Skipf), notes for the
	// table, the rollout case's figures.
	verdict string
	notes   []string
	rollout []report.NodeRollout
	mounts  bool
	// notChecked: what verify's own means (VerifyError) kept the case from
	// checking; the verdict is "could not check" unless the case failed on
	// the driver's account too.
	notChecked []string
	// findings are the failures' messages (the verdict's causes).
	findings []string
}

// addNote adds a note to the case's result (the table's footnotes).
func (c *check) addNote(n string) { c.notes = append(c.notes, n) }

// stop ends a case from Fatalf or Skipf.
type stop struct{}

func (c *check) Logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(c.out, "    %s %s: %s\n", time.Now().Format("15:04:05.000"), c.name, strings.ReplaceAll(msg, "\n", "\n        "))
}

// Errorf marks the case failed, unless an argument is verify's own error
// (VerifysOwn): that is recorded as what verify could not check, never as
// the driver's failure.
func (c *check) Errorf(format string, args ...any) {
	if ownIn(args) != nil {
		c.couldNotCheck(format, args...)
		return
	}
	c.failed = true
	c.findings = append(c.findings, fmt.Sprintf(format, args...))
	c.Logf("FAIL: "+format, args...)
}

// couldNotCheck records what verify's own means kept the case from checking.
func (c *check) couldNotCheck(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.notChecked = append(c.notChecked, msg)
	c.Logf("verify could not check (its own error, not the driver's): %s", msg)
}

func (c *check) Error(args ...any) {
	if ownIn(args) != nil {
		c.couldNotCheck("%s", fmt.Sprint(args...))
		return
	}
	c.Errorf("%s", fmt.Sprint(args...))
}

func (c *check) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	panic(stop{})
}

func (c *check) Fatal(args ...any) {
	if ownIn(args) != nil {
		c.couldNotCheck("%s", fmt.Sprint(args...))
		panic(stop{})
	}
	c.Fatalf("%s", fmt.Sprint(args...))
}

func (c *check) Skipf(format string, args ...any) {
	c.skipped = true
	c.Logf("skip: "+format, args...)
	panic(stop{})
}

// Cleanup registers f to run when the case ends.
func (c *check) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

// measure records a time the case measured.
func (c *check) measure(what string, d time.Duration) {
	c.times = append(c.times, report.CaseTime{What: what, Seconds: d.Seconds()})
	c.Logf("measured: %s: %.3f s", what, d.Seconds())
}

// run runs f as the case, recovering the case's own stop and running its
// cleanups; any other panic goes on.
func (c *check) run(f func(*check)) {
	defer func() {
		for i := len(c.cleanups) - 1; i >= 0; i-- {
			c.cleanups[i]()
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				panic(r)
			}
		}
	}()
	f(c)
}
