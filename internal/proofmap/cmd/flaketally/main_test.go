package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTally: two e2e runs (one test failing in the second) and two verify
// runs; the rows count per test and per run's exit, and a failure makes the
// exit 1.
func TestTally(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("e2e-1.json", `{"Action":"pass","Test":"TestA"}`+"\n"+`{"Action":"pass","Test":"TestB"}`+"\n"+`{"Action":"skip","Test":"TestC"}`+"\n")
	write("e2e-2.json", `{"Action":"pass","Test":"TestA"}`+"\n"+`{"Action":"fail","Test":"TestB/sub"}`+"\n"+`{"Action":"fail","Test":"TestB"}`+"\n")
	write("verify-1.log", "--- PASS: R2_volumes_across_instances (41.4s)\n--- PASS: R5_newer_driver_fails (21.2s)\n")
	write("verify-2.log", "--- PASS: R2_volumes_across_instances (40.1s)\n--- FAIL: R5_newer_driver_fails (60.0s)\n")
	for _, rc := range []string{"e2e-1.rc", "e2e-2.rc", "verify-1.rc"} {
		write(rc, "0\n")
	}
	write("verify-2.rc", "1\n")
	var out, errOut bytes.Buffer
	if code := run([]string{dir}, &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1 (a failure); %s", code, errOut.String())
	}
	for _, want := range []string{
		"e2e TestA", "e2e TestB", "case R5_newer_driver_fails",
		"2 e2e runs, 2 verify runs; 3 of 7 tests or cases failed at least once",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[1] == "TestB" && (f[2] != "2" || f[3] != "1" || f[5] != "50%") {
			t.Errorf("TestB: %q, want 2 runs, 1 failed, 50%%", line)
		}
		if len(f) == 6 && f[1] == "TestC" && (f[2] != "1" || f[4] != "1") {
			t.Errorf("TestC: %q, want 1 run, 1 skipped", line)
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "exit of each verify run") && !strings.Contains(line, " 2  ") {
			t.Errorf("verify runs' exits: %q, want 2 runs", line)
		}
	}
}

// TestTallyRunWithoutCases: verify runs that exit 2 before any case (a
// refused cluster) and report none fail the tally; so does a run whose exit
// code was not recorded.
func TestTallyRunWithoutCases(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"e2e-1.json":   `{"Action":"pass","Test":"TestA"}` + "\n",
		"verify-1.log": "error: refusing to run:\n",
		"verify-1.rc":  "2\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{dir}, &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1: no verify case ran and the e2e run's exit is unknown\n%s", code, out.String())
	}
	for _, want := range []string{"exit of each e2e run", "exit of each verify run", "2 of 3 tests or cases failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTallyEmptyDir(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{t.TempDir()}, &out, &errOut); code != 2 {
		t.Errorf("an empty directory: exit %d, want 2", code)
	}
}
