package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/testjson"
)

// testCase is one test's result in a go test -json log.
type testCase struct {
	name     string // TestE2E/1_deployed
	result   string // PASS, FAIL or SKIP
	duration string // 12.34s
}

// line is the test's result as go test -v prints it: "--- PASS: TestE2E/1_deployed (12.34s)".
func (c testCase) line() string {
	return fmt.Sprintf("--- %s: %s (%s)", c.result, c.name, c.duration)
}

// goTestLog is what kind/report reads of a go test -json log: the tests'
// results, in their order, and the text of its output events (benchmark
// lines, t.Log lines, what a suite prints after its tests), in order.
type goTestLog struct {
	cases  []testCase
	output []string // one line each, its newline removed
}

// readGoTestLog reads a go test -json (test2json -t) event stream. A test's
// case takes its place where the test started (its run event): test2json
// reports a parent's result after its subtests', go test -v before them.
func readGoTestLog(r io.Reader) (goTestLog, error) {
	var l goTestLog
	at := map[string]int{} // test → its index in l.cases
	err := testjson.Read(r, func(ev testjson.Event) {
		switch ev.Action {
		case "run", "pass", "fail", "skip":
			if ev.Test == "" {
				return
			}
			i, ok := at[ev.Test]
			if !ok {
				i = len(l.cases)
				at[ev.Test] = i
				l.cases = append(l.cases, testCase{name: ev.Test})
			}
			if ev.Action != "run" {
				l.cases[i].result = strings.ToUpper(ev.Action)
				l.cases[i].duration = fmt.Sprintf("%.2fs", ev.Elapsed)
			}
		case "output":
			l.output = append(l.output, strings.TrimSuffix(ev.Output, "\n"))
		}
	})
	// A test that started and never finished (a panic, a timeout) has no result.
	done := l.cases[:0]
	for _, c := range l.cases {
		if c.result != "" {
			done = append(done, c)
		}
	}
	l.cases = done
	return l, err
}

// logLine is a test's log line: "    process_bench_test.go:228: message".
var logLine = regexp.MustCompile(`_test\.go:[0-9]+: (.+)`)

// failures returns what tells why a go test run failed: its "--- FAIL"
// lines and the tests' log lines (t.Log, t.Error), without the benchmarks'
// "figure ..." result lines unless figures is set; the last n of them.
func (l goTestLog) failures(n int, figures bool) []string {
	var out []string
	for _, o := range l.output {
		if strings.Contains(o, "--- FAIL") {
			out = append(out, o)
		} else if m := logLine.FindStringSubmatch(o); m != nil && (figures || !strings.HasPrefix(m[1], "figure")) {
			out = append(out, o)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
