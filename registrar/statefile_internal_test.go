package registrar

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
)

// startTimeFaked is why the state-file tests that compare this process's
// start time with the recorded one skip under make test-platforms.
const startTimeFaked = "the state file records its writer's start time (field 22 of /proc/<pid>/stat), which the emulator answers per thread, not per process"

func newTestStateWriter(t *testing.T, path string, logs *bytes.Buffer) *stateWriter {
	t.Helper()
	platformtest.SkipUnderEmulation(t, startTimeFaked)
	w := &stateWriter{path: path, log: slog.New(slog.NewTextHandler(logs, nil)), pid: os.Getpid()}
	var err error
	if w.start, err = procStart(w.pid); err != nil {
		t.Fatalf("procStart(self): %v", err)
	}
	return w
}

// writeRecord writes rec as a state file at path, as a writer of another
// process would.
func writeRecord(t *testing.T, path string, rec stateRecord) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// exitedPID returns the pid of a process that has exited and been reaped.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := platformtest.SelfCommand("-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.Pid()
}

// TestProbeStateRecords: what ProbeState answers for each kind of record,
// written by the writer the Registrar uses (the Registrar's own stages are
// in statefile_test.go and, through the binary, cmd/csi-registrar).
func TestProbeStateRecords(t *testing.T) {
	platformtest.SkipUnderEmulation(t, startTimeFaked)
	dir := t.TempDir()
	since := time.Now().Add(-3 * time.Second)
	for _, c := range []struct {
		name    string
		st      Status
		ok      bool
		message []string
	}{
		{name: "registered", st: Status{Stage: StageRegistered, DriverName: "x.example.com", Since: since}, ok: true,
			message: []string{"registered for 3s (driver x.example.com, pid "}},
		{name: "fallback", st: Status{Stage: StageStandingBy, Fallback: true, Detail: "instance b is newer", DriverName: "x.example.com", Since: since},
			ok: true, message: []string{"standing by (ready to take the registration back) for 3s: instance b is newer (driver x.example.com, pid "}},
		{name: "standing by", st: Status{Stage: StageStandingBy, Detail: "instance b is newer", Since: since},
			message: []string{"not registered: standing by for 3s: instance b is newer (pid "}},
		{name: "stopped", st: Status{Stage: StageStopped, Detail: "listen tcp :1: bind: permission denied", DriverName: "x.example.com", Since: since},
			message: []string{"not registered: stopped for 3s: listen tcp :1: bind: permission denied (driver x.example.com, pid "}},
		{name: "starting", st: Status{}, message: []string{"not registered: starting (pid "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			path := filepath.Join(dir, c.name+".state")
			w := newTestStateWriter(t, path, &logs)
			w.write(c.st)
			state, err := ProbeState(path)
			got := state
			if err != nil {
				got = err.Error()
			}
			if (err == nil) != c.ok || !containsAll(got, c.message...) {
				t.Errorf("ProbeState = %q, %v; want ok=%v and %q", state, err, c.ok, c.message)
			}
			if logs.Len() != 0 {
				t.Errorf("the writer logged:\n%s", logs.String())
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestProbeStateWriterGone: a record whose writer has exited, or whose pid
// is now another process, is no running registrar.
func TestProbeStateWriterGone(t *testing.T) {
	platformtest.SkipUnderEmulation(t, startTimeFaked)
	dir := t.TempDir()
	self, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	rec := recordOf(Status{Stage: StageRegistered, DriverName: "x.example.com"}, 0, 0)
	for _, c := range []struct {
		name       string
		pid        int
		start      uint64
		want       string
		notAnError bool
	}{
		{name: "exited", pid: exitedPID(t), start: 1, want: "has exited"},
		{name: "pid reused", pid: os.Getpid(), start: self + 1, want: "that pid is another process now"},
		{name: "start unknown", pid: os.Getpid(), start: 0, notAnError: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			r := rec
			r.PID, r.Start = c.pid, c.start
			writeRecord(t, path, r)
			_, err := ProbeState(path)
			if c.notAnError {
				if err != nil {
					t.Errorf("ProbeState = %v, want nil", err)
				}
				return
			}
			if err == nil || !containsAll(err.Error(), "no registrar is running in this container: ", c.want, path+" says: registered") {
				t.Errorf("ProbeState = %v; want no registrar, %q, and the last state", err, c.want)
			}
		})
	}
}

// TestProbeStateBadFiles: no file, a file of another kind, a path that is
// not absolute.
func TestProbeStateBadFiles(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte(`{"pid":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "none"): "no registrar is running in this container: no state file " + filepath.Join(dir, "none"),
		other:                      other + " is not a csi-registrar state file",
		dir:                        "cannot read the registrar's state: read " + dir + ": is a directory",
		"csi-registrar.state":      `invalid state file "csi-registrar.state": must be an absolute, clean path`,
		"":                         `invalid state file "": must be an absolute, clean path`,
	} {
		if _, err := ProbeState(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ProbeState(%q) = %v, want %q", path, err, want)
		}
	}
}

// TestStateWriterLeavesOthersAlone: the writer replaces neither a file it
// cannot read as a state file nor the state file of another live process,
// logs why once, and removes at the end only the file it wrote.
func TestStateWriterLeavesOthersAlone(t *testing.T) {
	dir := t.TempDir()
	parentStart, err := procStart(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	liveOther := recordOf(Status{Stage: StageRegistered}, os.Getppid(), parentStart)
	liveData, _ := json.Marshal(liveOther)
	for name, content := range map[string][]byte{
		"not ours":         []byte("some other program's file\n"),
		"live other":       liveData,
		"not a state file": []byte(`{"format":"something else","pid":1}`),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			w := newTestStateWriter(t, path, &logs)
			w.write(Status{Stage: StageWaitingForKubelet})
			w.write(Status{Stage: StageRegistered})
			w.remove()
			if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
				t.Errorf("the file changed to %q", got)
			}
			if n := strings.Count(logs.String(), "state file left alone"); n != 1 {
				t.Errorf("want one log line saying the file was left alone, got:\n%s", logs.String())
			}
		})
	}
	t.Run("replaced after written", func(t *testing.T) {
		path := filepath.Join(dir, "replaced")
		var logs bytes.Buffer
		w := newTestStateWriter(t, path, &logs)
		w.write(Status{Stage: StageRegistered})
		// Another process puts its own file there: remove must keep it.
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
		w.remove()
		if got, _ := os.ReadFile(path); string(got) != "new" {
			t.Errorf("remove changed another's file: %q", got)
		}
	})
	t.Run("stale of an exited writer", func(t *testing.T) {
		path := filepath.Join(dir, "stale")
		writeRecord(t, path, recordOf(Status{Stage: StageRegistered}, exitedPID(t), 1))
		var logs bytes.Buffer
		w := newTestStateWriter(t, path, &logs)
		w.write(Status{Stage: StageWaitingForDriver})
		rec, err := readStateFile(path)
		if err != nil || rec.PID != os.Getpid() || rec.Stage != "waiting for driver" {
			t.Errorf("the stale file was not replaced: %+v, %v", rec, err)
		}
		w.remove()
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("remove left the file it wrote: %v", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 4 { // the three above and "replaced"
			t.Errorf("temporary files left: %v", entries)
		}
	})
}

// TestStateWriterCannotWrite: a directory that does not exist is logged
// once, not at every change, and writing resumes when it can.
func TestStateWriterCannotWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, "state")
	var logs bytes.Buffer
	w := newTestStateWriter(t, path, &logs)
	w.write(Status{Stage: StageWaitingForDriver})
	w.write(Status{Stage: StageWaitingForKubelet})
	if n := strings.Count(logs.String(), "cannot write the state file"); n != 1 {
		t.Errorf("want one error line, got:\n%s", logs.String())
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.write(Status{Stage: StageRegistered})
	if _, err := ProbeState(path); err != nil || !strings.Contains(logs.String(), "state file written again") {
		t.Errorf("after the directory appeared: ProbeState = %v; logs:\n%s", err, logs.String())
	}
	w.remove()
}

// TestCheckStateFile: Options.StateFile is absolute and clean, and not in
// the registration directory.
func TestCheckStateFile(t *testing.T) {
	for path, want := range map[string]string{
		"":                              "",
		DefaultStateFile:                "",
		"/registration-other/state":     "",
		"state":                         "must be an absolute, clean path",
		"/dev/shm/../state":             "must be an absolute, clean path",
		"/registration/csi-registrar.s": "must not be under the registration directory /registration, which the kubelet watches",
	} {
		err := checkStateFile(path, "/registration")
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("checkStateFile(%q) = %v, want %q", path, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "Options.StateFile") {
			t.Errorf("checkStateFile(%q) = %v, want it to name Options.StateFile", path, err)
		}
	}
}

// BenchmarkProbeState measures ProbeState alone (read and decode the file,
// look at /proc/<pid>/stat) on a registered record of this process:
//
//	go test -run '^$' -bench ProbeState ./registrar
func BenchmarkProbeState(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state")
	var logs bytes.Buffer
	w := &stateWriter{path: path, log: slog.New(slog.NewTextHandler(&logs, nil)), pid: os.Getpid()}
	w.start, _ = procStart(w.pid)
	w.write(Status{Stage: StageRegistered, DriverName: "x.example.com", Since: time.Now()})
	for b.Loop() {
		if _, err := ProbeState(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateWrite measures one change of the state file (encode, write
// a temporary file, rename), which runs under the status box's mutex.
func BenchmarkStateWrite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state")
	var logs bytes.Buffer
	w := &stateWriter{path: path, log: slog.New(slog.NewTextHandler(&logs, nil)), pid: os.Getpid()}
	stages := []Stage{StageWaitingForKubelet, StageRegistered}
	i := 0
	for b.Loop() {
		w.write(Status{Stage: stages[i%2], DriverName: "x.example.com"})
		i++
	}
	if logs.Len() != 0 {
		b.Fatal(logs.String())
	}
}
