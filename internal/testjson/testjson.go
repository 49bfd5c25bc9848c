// Package testjson reads the event stream of go test -json (cmd/test2json):
// one JSON object a line. kind/bench/report and internal/proofmap read test results
// through it.
package testjson

import (
	"bufio"
	"encoding/json"
	"io"
	"time"
)

// Event is one line of go test -json.
type Event struct {
	Time    time.Time
	Action  string // start, run, pause, cont, pass, bench, fail, output, skip
	Package string
	Test    string  // empty for a package's events
	Elapsed float64 // seconds, on pass, fail and skip
	Output  string  // on output: one line of the test's output, its newline included
}

// Read calls fn with every event of r, in order. A line that is not a JSON
// object (a make or shell line around the stream) is passed on as an output
// event of no test, its newline restored, so that nothing of the log is lost.
func Read(r io.Reader, fn func(Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev Event
		if b := sc.Bytes(); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &ev) != nil {
			ev = Event{Action: "output", Output: sc.Text() + "\n"}
		}
		fn(ev)
	}
	return sc.Err()
}
