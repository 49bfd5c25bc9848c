package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

const ciLog = "=== [0s] toolchain: go version go1.26.8 linux/amd64\n=== [0s] make demo\n...\n=== step times\n" +
	"    12s  make demo\n    66s  make test\n=== total 78s\n"

// TestRecord: a run read from .ci/run's output lands in the file; a second
// run of the same commit, date and kind replaces it, another is added in
// date order; bad input changes nothing.
func TestRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "times.json")
	run := doctest.CIRun{Commit: "abcdef1", Date: "2026-11-28", Kind: "warm", Note: "test"}
	if err := record(file, run, strings.NewReader(ciLog), io.Discard); err != nil {
		t.Fatal(err)
	}
	again := strings.Replace(ciLog, "66s  make test", "70s  make test", 1)
	if err := record(file, run, strings.NewReader(again), io.Discard); err != nil {
		t.Fatal(err)
	}
	older := run
	older.Commit, older.Date = "1234567", "2026-11-27"
	if err := record(file, older, strings.NewReader(ciLog), io.Discard); err != nil {
		t.Fatal(err)
	}
	times, err := doctest.ReadTimes(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(times.Runs) != 2 || times.Runs[0].Commit != "1234567" || times.Runs[1].Steps[1].Seconds != 70 || times.Runs[1].Total != 78 {
		t.Errorf("times = %+v, want the older run first and the replaced one with make test 70 s", times.Runs)
	}
	for name, tc := range map[string]struct {
		run doctest.CIRun
		log string
	}{
		"no commit":     {doctest.CIRun{Date: "2026-11-28", Kind: "warm", Note: "n"}, ciLog},
		"a bad kind":    {doctest.CIRun{Commit: "abcdef1", Date: "2026-11-28", Kind: "hot", Note: "n"}, ciLog},
		"a bad date":    {doctest.CIRun{Commit: "abcdef1", Date: "28.11.2026", Kind: "warm", Note: "n"}, ciLog},
		"no step table": {run, "=== [0s] make demo\n"},
	} {
		if err := record(file, tc.run, strings.NewReader(tc.log), io.Discard); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if after, _ := doctest.ReadTimes(file); len(after.Runs) != 2 {
		t.Errorf("bad input changed the file: %d runs", len(after.Runs))
	}
}
