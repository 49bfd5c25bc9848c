package main

import (
	"regexp"
	"strings"
)

// testCase is one "--- PASS: TestE2E/1_deployed (12.34s)" line of go test -v.
type testCase struct {
	line     string // the line, its indentation removed
	name     string // TestE2E/1_deployed
	result   string // PASS, FAIL or SKIP
	duration string // 12.34s
}

var caseLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([^)]*)\)`)

// testCases returns the test results of a go test -v log, in their order.
func testCases(log string) []testCase {
	var cs []testCase
	for _, l := range strings.Split(log, "\n") {
		if m := caseLine.FindStringSubmatch(l); m != nil {
			cs = append(cs, testCase{line: strings.TrimSpace(l), name: m[2], result: m[1], duration: m[3]})
		}
	}
	return cs
}

// logLine is a test's log line: "    process_bench_test.go:228: message".
var logLine = regexp.MustCompile(`_test\.go:[0-9]+: (.+)`)

// failures returns what tells why a go test -v run failed: its "--- FAIL"
// lines and the tests' log lines (t.Log, t.Error), without the benchmarks'
// "figure ..." result lines unless figures is set; the last n of them.
func failures(log string, n int, figures bool) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "--- FAIL") {
			out = append(out, l)
		} else if m := logLine.FindStringSubmatch(l); m != nil && (figures || !strings.HasPrefix(m[1], "figure")) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
