package proofmap

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/testjson"
)

// What .ci/run keeps of a run in its proof directory (bin/ci), for each
// step (by Slug of its name):
//
//	<slug>.log     the step's output as printed
//	<slug>.rc      its exit code
//	<slug>.skipped instead of the rest: the step's slice (0: the gate), which this run did not choose
//	<slug>.json    go test -json of the -test.v output in the log
//	<slug>/*.json  more go test -json (make test-pluginmanager: one a minor)

// Slug is a step's file name in the proof directory: its name in lower
// case, each run of other characters than letters and digits one "-".
func Slug(step string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(step) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}

// Verdicts.
const (
	Pass    = "PASS"
	Fail    = "FAIL"
	Skip    = "SKIP"
	Missing = "MISSING"
	// NotChosen: the step is in a part of CI (the gate or a slice) that
	// this run did not choose; it proves nothing here, and fails nothing.
	NotChosen = "NOT IN THIS RUN"
)

// StepRun is what one step of a run left.
type StepRun struct {
	Ran bool // its exit code was written
	RC  int
	// Skipped: the run did not choose the step's part of CI; Part is that
	// part (a slice's number, 0 for the gate).
	Skipped bool
	Part    int
	Test    map[string][]string // top-level test -> its go test -json actions (pass, fail, skip)
	Log     string
}

// ReadStep reads what the step left in dir.
func ReadStep(dir, step string) (StepRun, error) {
	slug := Slug(step)
	r := StepRun{Test: map[string][]string{}}
	var err error
	if r.RC, r.Ran, err = readNumber(filepath.Join(dir, slug+".rc"), "an exit code"); err != nil {
		return r, err
	}
	if r.Part, r.Skipped, err = readNumber(filepath.Join(dir, slug+".skipped"), "a slice's number"); err != nil {
		return r, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, slug+".log")); err == nil {
		r.Log = string(b)
	}
	files, _ := filepath.Glob(filepath.Join(dir, slug, "*.json"))
	files = append([]string{filepath.Join(dir, slug+".json")}, files...)
	for _, f := range files {
		if err := readTestJSON(f, r.Test); err != nil && !os.IsNotExist(err) {
			return r, err
		}
	}
	return r, nil
}

// readNumber reads the number a step's file holds (what names it in the
// error); found is false, and no error, when there is no such file.
func readNumber(path, what string) (n int, found bool, err error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return 0, false, fmt.Errorf("%s: %q is not %s", path, b, what)
	}
	return n, true, nil
}

// readTestJSON adds the pass, fail and skip actions of the top-level tests
// in a go test -json file to acts (lines that are not JSON: none of them).
func readTestJSON(file string, acts map[string][]string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return testjson.Read(f, func(ev testjson.Event) {
		if ev.Test == "" || strings.Contains(ev.Test, "/") {
			return
		}
		switch ev.Action {
		case "pass", "fail", "skip":
			acts[ev.Test] = append(acts[ev.Test], ev.Action)
		}
	})
}

var caseLine = regexp.MustCompile(`(?m)^--- ([A-Z ]+): (\S+) \(`)

// asExpected is what verify prints when --expect judged every outcome.
const asExpected = "==== every outcome as expected"

// Verdict gives a row of a step that ran its verdict from what the step left.
func Verdict(row Row, s StepRun) (string, string) {
	if !s.Ran && s.Skipped {
		if s.Part == 0 {
			return NotChosen, "the gate, left out of this run"
		}
		return NotChosen, fmt.Sprintf("slice %d, another run's", s.Part)
	}
	if !s.Ran {
		return Missing, "the step did not run (no exit code)"
	}
	switch row.Kind {
	case Target:
		if s.RC != 0 {
			return Fail, fmt.Sprintf("the step exited %d", s.RC)
		}
		return Pass, ""
	case Case:
		var seen []string
		for _, m := range caseLine.FindAllStringSubmatch(s.Log, -1) {
			if m[2] == row.Name {
				seen = append(seen, m[1])
			}
		}
		if len(seen) == 0 {
			return Missing, "no \"--- <verdict>: " + row.Name + "\" line in the step's output"
		}
		for _, v := range seen {
			if v == "FAIL" || v == "SKIP" || v == "COULD NOT CHECK" {
				if strings.Contains(s.Log, asExpected) {
					return Pass, "as --expect says"
				}
				return Fail, "verify: " + strings.Join(seen, ", ")
			}
		}
		return Pass, strings.Join(seen, ", ")
	}
	acts := s.Test[row.Name]
	if len(acts) == 0 {
		return Missing, "not in the step's go test -json"
	}
	has := func(a string) bool {
		for _, x := range acts {
			if x == a {
				return true
			}
		}
		return false
	}
	switch {
	case has("fail"):
		return Fail, ""
	case has("pass"):
		return Pass, ""
	case row.Expect == ExpectSkip:
		return Skip, "skips itself here, as the map says"
	default:
		return Fail, "skipped, the map wants PASS"
	}
}

// TestActions returns the pass, fail and skip actions of each top-level
// test in a go test -json file.
func TestActions(file string) (map[string][]string, error) {
	acts := map[string][]string{}
	return acts, readTestJSON(file, acts)
}

// CaseVerdicts returns the verdicts verify printed for each case in its
// output ("--- PASS: <case> (...)" lines).
func CaseVerdicts(log string) map[string][]string {
	out := map[string][]string{}
	for _, m := range caseLine.FindAllStringSubmatch(log, -1) {
		out[m[2]] = append(out[m[2]], m[1])
	}
	return out
}
