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
