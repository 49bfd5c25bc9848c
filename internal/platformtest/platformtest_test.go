package platformtest

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing, to
// see Report fail.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// run calls Report with a recorder in its own goroutine (Fatalf ends it).
func run(t *testing.T) (line string, failed []string) {
	t.Helper()
	r := &recorder{TB: t}
	var out strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		Report(r, &out)
	}()
	<-done
	return out.String(), r.failed
}

// Report names the platform this test binary runs as, from the runtime and
// from its own ELF header, which agree.
func TestReport(t *testing.T) {
	t.Setenv(EnvGOARCH, runtime.GOARCH)
	line, failed := run(t)
	if len(failed) > 0 {
		t.Fatalf("Report failed on the platform it was built for: %v", failed)
	}
	for _, want := range []string{"platformtest: ", " GOARCH=" + runtime.GOARCH + " ", " int=" + strconv.Itoa(strconv.IntSize) + " ", " elf=EM_"} {
		if !strings.Contains(line, want) {
			t.Errorf("Report wrote %q: no %q", line, want)
		}
	}
	fmt.Print(line) // kind/platforms.sh reads it
}

// Report refuses a binary asked to run as another GOARCH than it does:
// what a test binary built for the host would do under the emulator's
// name.
func TestReportRefusesAnotherGOARCH(t *testing.T) {
	other := "s390x"
	if runtime.GOARCH == other {
		other = "amd64"
	}
	t.Setenv(EnvGOARCH, other)
	line, failed := run(t)
	if len(failed) != 1 || !strings.Contains(failed[0], "runs as GOARCH="+runtime.GOARCH) || !strings.Contains(failed[0], other) || line != "" {
		t.Errorf("Report with %s=%s wrote %q and failed with %v: want one failure naming both, nothing written", EnvGOARCH, other, line, failed)
	}
}

// SelfCommand runs the test binary through $EnvExec when set.
func TestSelfCommand(t *testing.T) {
	t.Setenv(EnvExec, "")
	if c := SelfCommand("-test.run=^$"); c.Args[0] != c.Path || len(c.Args) != 2 {
		t.Errorf("without %s: %v", EnvExec, c.Args)
	}
	t.Setenv(EnvExec, "/usr/bin/qemu-arm")
	c := SelfCommand("-test.run=^$")
	if c.Path != "/usr/bin/qemu-arm" || len(c.Args) != 3 || c.Args[2] != "-test.run=^$" {
		t.Errorf("with %s=/usr/bin/qemu-arm: %s %v", EnvExec, c.Path, c.Args)
	}
}
