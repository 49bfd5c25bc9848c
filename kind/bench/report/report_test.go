package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The want/ files are what the awk programs this command replaced printed
// for the same input (make bench's table, kind/bench/retry.sh's and
// kind/e2e/matrix.sh's). The matrix/ *.json are go test -json (test2json -t)
// event streams, converted from go test -v text with go tool test2json.

// copyDir copies testdata/<name> into a temporary directory (the command
// writes its tables beside its input).
func copyDir(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func want(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "want", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func runReport(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("report %q: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

func checkFile(t *testing.T, path, wantName string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if w := want(t, wantName); string(got) != w {
		t.Errorf("%s =\n%s\nwant\n%s", filepath.Base(path), got, w)
	}
}

func TestBench(t *testing.T) {
	dir := copyDir(t, "bench")
	if got, w := runReport(t, "bench", "-dir", dir), want(t, "bench.txt"); got != w {
		t.Errorf("stdout =\n%q\nwant\n%q", got, w)
	}
	checkFile(t, filepath.Join(dir, "results.md"), "results.md")
	checkFile(t, filepath.Join(dir, "table.tsv"), "table.tsv")
}

func TestBenchNoResults(t *testing.T) {
	dir := t.TempDir()
	if got := runReport(t, "bench", "-dir", dir); !strings.HasPrefix(got, "\nfigure  what") {
		t.Errorf("stdout = %q, want the header alone", got)
	}
}

func TestRetry(t *testing.T) {
	dir := copyDir(t, "retry")
	// 1.36 has no results (its run failed): no column.
	if got, w := runReport(t, "retry", "-dir", dir, "1.35", "1.36", "1.37"), want(t, "retry.md"); got != w {
		t.Errorf("stdout =\n%s\nwant\n%s", got, w)
	}
	checkFile(t, filepath.Join(dir, "table.md"), "retry.md")
}

func TestMatrix(t *testing.T) {
	dir := copyDir(t, "matrix")
	if got, w := runReport(t, "matrix", "-dir", dir, "1.34", "1.37"), want(t, "matrix.md"); got != w {
		t.Errorf("stdout =\n%s\nwant\n%s", got, w)
	}
	checkFile(t, filepath.Join(dir, "table.md"), "matrix.md")
}

func TestCases(t *testing.T) {
	got := runReport(t, "cases", filepath.Join("testdata", "matrix", "1.34.json"))
	w := "    --- PASS: TestE2E (30.10s)\n    --- PASS: TestE2E/1_deployed (12.34s)\n    --- FAIL: TestE2E/2_pod_deleted (17.76s)\n"
	if got != w {
		t.Errorf("cases =\n%s\nwant\n%s", got, w)
	}
}

func TestFailures(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	// go test -json's events (test2json) for a failed benchmark test.
	ev := func(action, output string) string {
		return fmt.Sprintf(`{"Action":%q,"Package":"cmd/csi-registrar","Test":"TestBenchStart","Output":%q}`+"\n", action, output)
	}
	if err := os.WriteFile(log, []byte(ev("run", "")+
		ev("output", "=== RUN   TestBenchStart\n")+
		ev("output", "    process_bench_test.go:228: figure 2 | start–ready\n")+
		ev("output", "    process_bench_test.go:300: failed to start: exit 1\n")+
		ev("output", "--- FAIL: TestBenchStart (1.00s)\n")+
		ev("output", "    process_bench_test.go:310: \n")+
		ev("fail", "")+
		`{"Action":"output","Package":"cmd/csi-registrar","Output":"FAIL\n"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := "    process_bench_test.go:300: failed to start: exit 1\n--- FAIL: TestBenchStart (1.00s)\n"
	if got := runReport(t, "failures", log); got != w {
		t.Errorf("failures =\n%s\nwant\n%s", got, w)
	}
	if got := runReport(t, "failures", "-figures", "-n", "1", log); got != "--- FAIL: TestBenchStart (1.00s)\n" {
		t.Errorf("failures -n 1 = %q, want the last line alone", got)
	}
	if got := runReport(t, "failures", "-figures", log); !strings.Contains(got, "figure 2") {
		t.Errorf("failures -figures = %q, want the figure line too", got)
	}
}

func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{nil, {"nosuch"}, {"cases"}} {
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("report %q: exit %d, want 2", args, code)
		}
	}
}
