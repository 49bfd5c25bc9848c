package doctest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The build, demo and CI times the README quotes, and the file they come
// from: docs/times.json, written by citimes from .ci/run's step table.

// Times is docs/times.json: every recorded run, oldest first.
type Times struct {
	Runs []CIRun `json:"runs"`
}

// CIRun is one recorded run: of .ci/run (its step table), or of some of its
// commands alone.
type CIRun struct {
	Commit string `json:"commit"` // "" when the run's report did not state it
	Date   string `json:"date"`   // YYYY-MM-DD
	Kind   string `json:"kind"`   // "cold" (nothing cached) or "warm"
	Note   string `json:"note"`   // the machine, what was cached, where the figures were first written down
	Total  int    `json:"total_s,omitempty"`
	Steps  []Step `json:"steps,omitempty"`
}

// Step is one line of .ci/run's step table.
type Step struct {
	Name    string `json:"name"`
	Seconds int    `json:"s"`
	Failed  bool   `json:"failed,omitempty"`
}

var (
	stepLine  = regexp.MustCompile(`^\s*(\d+)s  (.+?)(  \(FAILED, exit \d+\))?$`)
	totalLine = regexp.MustCompile(`^=== total (\d+)s$`)
)

// ParseStepTimes reads .ci/run's output (or only its end) and returns its
// step table, the lines after "=== step times", and its total, the
// "=== total Ns" line (0 when the output has none). The last table counts.
func ParseStepTimes(r io.Reader) ([]Step, int, error) {
	var (
		steps []Step
		total int
		in    bool
		found bool
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == "=== step times":
			in, found, steps, total = true, true, nil, 0
		case totalLine.MatchString(line):
			total, _ = strconv.Atoi(totalLine.FindStringSubmatch(line)[1])
			in = false
		case in:
			m := stepLine.FindStringSubmatch(line)
			if m == nil {
				return nil, 0, fmt.Errorf("step table: %q is not a step line (\"%%6ss  NAME\", as .ci/run's summary prints)", line)
			}
			s, _ := strconv.Atoi(m[1])
			steps = append(steps, Step{Name: m[2], Seconds: s, Failed: m[3] != ""})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	if !found {
		return nil, 0, fmt.Errorf("no \"=== step times\" line: give the output of .ci/run (its summary at the end)")
	}
	return steps, total, nil
}

// ReadTimes reads a times file.
func ReadTimes(path string) (Times, error) {
	var t Times
	b, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

var (
	commitForm = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	dateForm   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// Validate returns what is wrong with a run, or nil.
func (r CIRun) Validate() error {
	switch {
	case r.Commit != "" && !commitForm.MatchString(r.Commit):
		return fmt.Errorf("commit %q: want 7 to 40 hex digits (git rev-parse --short HEAD), or none when unknown", r.Commit)
	case !dateForm.MatchString(r.Date):
		return fmt.Errorf("date %q: want YYYY-MM-DD", r.Date)
	case r.Kind != "cold" && r.Kind != "warm":
		return fmt.Errorf("kind %q: want cold (nothing cached) or warm", r.Kind)
	case len(r.Steps) == 0 && r.Total == 0:
		return fmt.Errorf("a run of %s on %s with no step and no total", r.Commit, r.Date)
	}
	return nil
}

// Add puts run into the file's runs, in place of a run of the same commit,
// date and kind, the runs sorted by date.
func (t *Times) Add(run CIRun) {
	t.Runs = slices.DeleteFunc(t.Runs, func(r CIRun) bool {
		return r.Commit == run.Commit && r.Date == run.Date && r.Kind == run.Kind
	})
	t.Runs = append(t.Runs, run)
	slices.SortStableFunc(t.Runs, func(a, b CIRun) int { return strings.Compare(a.Date, b.Date) })
}

// Marshal returns the file's text.
func (t Times) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

var (
	// A figure of the README: "`make demo` 415 s" (a step), "`.ci/run` 4358 s" (the total).
	timeFigure = regexp.MustCompile("`([^`]+)`\\s+(\\d+)\\s+s\\b")
	// Any time in seconds: each must be a figure.
	anySeconds = regexp.MustCompile(`\b\d+\s+s\b`)
	// Where a run's figures end: "(cold, 10599b2, 2026-11-27)".
	timeSource = regexp.MustCompile(`\((cold|warm),\s+([0-9a-f]{7,40}),\s+(\d{4}-\d{2}-\d{2})\)`)
	// The first-run range: "Expect 6.9 to 21.4 minutes ... (... 2026-11-23 to 2026-11-27".
	timeRange = regexp.MustCompile(`Expect\s+([0-9.]+)\s+to\s+([0-9.]+)\s+minutes[^(]*\([^)]*?(\d{4}-\d{2}-\d{2})\s+to\s+(\d{4}-\d{2}-\d{2})`)
)

// firstRunSteps are the commands whose cold times make the first-run range.
var firstRunSteps = []string{"make demo", "make test"}

// CheckTimes returns what is wrong with the README's times section (text,
// between its markers) against the times file (source names it): each
// figure "`step` N s" must be followed, before the next figure's, by the run
// it comes from, "(cold|warm, commit, date)", and be that run's step (the
// total when the step is `.ci/run`); every "N s" must be such a figure; and
// the range "Expect A to B minutes ... (... D1 to D2)" must be the fastest
// and slowest cold `make demo` and `make test` of the file, in minutes to
// one decimal, and the dates of the first and last such runs.
func CheckTimes(where, text string, t Times, source string) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}
	for _, r := range t.Runs {
		if err := r.Validate(); err != nil {
			fail("%s: %v", source, err)
		}
	}
	figs := timeFigure.FindAllStringSubmatchIndex(text, -1)
	srcs := timeSource.FindAllStringSubmatchIndex(text, -1)
	if n := len(anySeconds.FindAllString(text, -1)); n != len(figs) {
		fail("%d times in seconds, %d of them as \"`step` N s\": name the step of each (`make test` 449 s, `.ci/run` 4358 s)", n, len(figs))
	}
	for _, f := range figs {
		step, secs := text[f[2]:f[3]], text[f[4]:f[5]]
		var src []int
		for _, s := range srcs {
			if s[0] > f[1] {
				src = s
				break
			}
		}
		if src == nil {
			fail("`%s` %s s: no \"(cold|warm, commit, date)\" after it: say which run of %s it is", step, secs, source)
			continue
		}
		kind, commit, date := text[src[2]:src[3]], text[src[4]:src[5]], text[src[6]:src[7]]
		i := slices.IndexFunc(t.Runs, func(r CIRun) bool {
			return r.Kind == kind && r.Date == date && r.Commit != "" && (strings.HasPrefix(r.Commit, commit) || strings.HasPrefix(commit, r.Commit))
		})
		if i < 0 {
			fail("`%s` %s s (%s, %s, %s): %s has no %s run of %s on %s: record it there (docs/development.md, \"CI\")", step, secs, kind, commit, date, source, kind, commit, date)
			continue
		}
		run := t.Runs[i]
		got, ok := run.Total, step == ".ci/run"
		if !ok {
			for _, s := range run.Steps {
				if s.Name == step && !s.Failed {
					got, ok = s.Seconds, true
				}
			}
		}
		switch {
		case !ok:
			fail("`%s` %s s: the %s run of %s in %s has no green step %q", step, secs, kind, commit, source, step)
		case strconv.Itoa(got) != secs:
			fail("`%s` %s s: the %s run of %s in %s says %d s: correct the README", step, secs, kind, commit, source, got)
		}
	}
	m := timeRange.FindStringSubmatch(text)
	if m == nil {
		fail("no \"Expect A to B minutes ... (... D1 to D2)\": the range of the first runs of %s in %s", strings.Join(firstRunSteps, " and "), source)
		return errs
	}
	lo, hi, first, last := math.Inf(1), math.Inf(-1), "", ""
	for _, r := range t.Runs {
		if r.Kind != "cold" {
			continue
		}
		for _, s := range r.Steps {
			if !slices.Contains(firstRunSteps, s.Name) || s.Failed {
				continue
			}
			lo, hi = math.Min(lo, float64(s.Seconds)), math.Max(hi, float64(s.Seconds))
			if first == "" || r.Date < first {
				first = r.Date
			}
			if r.Date > last {
				last = r.Date
			}
		}
	}
	if first == "" {
		fail("%s has no cold run of %s", source, strings.Join(firstRunSteps, " or "))
		return errs
	}
	want := fmt.Sprintf("%.1f to %.1f minutes, %s to %s", lo/60, hi/60, first, last)
	if got := fmt.Sprintf("%s to %s minutes, %s to %s", m[1], m[2], m[3], m[4]); got != want {
		fail("the first runs' range says %s; the cold runs of %s in %s say %s", got, strings.Join(firstRunSteps, " and "), source, want)
	}
	return errs
}
