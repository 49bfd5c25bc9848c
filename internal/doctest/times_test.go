package doctest_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// timesFile is where the README's build, demo and CI times come from.
const timesFile = "docs/times.json"

// TestReadmeTimes: every time the README's <!-- cold-times --> section
// quotes is the step of the run of docs/times.json it names (cold or warm,
// commit, date), and its first-run range is the file's.
func TestReadmeTimes(t *testing.T) {
	times, err := doctest.ReadTimes(filepath.Join(root, timesFile))
	if err != nil {
		t.Fatal(err)
	}
	text, line, err := doctest.Section(filepath.Join(root, "README.md"), "cold-times")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range doctest.CheckTimes("README.md:"+strconv.Itoa(line), text, times, timesFile) {
		t.Error(err)
	}
	t.Logf("README.md:%d: checked against %d runs of %s", line, len(times.Runs), timesFile)
}

// TestTimesCaught: the times check fails on a figure of no run, a wrong
// figure, a figure without its run, a time of no step, and a wrong range;
// and passes the right section. ParseStepTimes reads .ci/run's summary.
func TestTimesCaught(t *testing.T) {
	log := "=== [0s] toolchain: go\nmake: output\n=== step times\n   415s  make demo\n     9s  make demo-down\n" +
		"    87s  make e2e-kind  (FAILED, exit 2)\n=== total 511s\n"
	steps, total, err := doctest.ParseStepTimes(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 || steps[0] != (doctest.Step{Name: "make demo", Seconds: 415}) || !steps[2].Failed || steps[2].Name != "make e2e-kind" || total != 511 {
		t.Errorf("ParseStepTimes = %+v, %d; want three steps, the last failed, total 511", steps, total)
	}
	if _, _, err := doctest.ParseStepTimes(strings.NewReader("=== step times\n   415s make demo\n")); err == nil {
		t.Error("a step line with one space before the name: no error")
	}
	if _, _, err := doctest.ParseStepTimes(strings.NewReader("no table\n")); err == nil {
		t.Error("no step table: no error")
	}

	times := doctest.Times{Runs: []doctest.CIRun{
		{Commit: "aaaaaaa", Date: "2026-11-23", Kind: "cold", Note: "n", Steps: []doctest.Step{{Name: "make demo", Seconds: 600}, {Name: "make test", Seconds: 300}}, Total: 900},
		{Commit: "bbbbbbb", Date: "2026-11-25", Kind: "warm", Note: "n", Steps: []doctest.Step{{Name: "make demo", Seconds: 12}}},
		{Commit: "", Date: "2026-11-26", Kind: "cold", Note: "a user", Steps: []doctest.Step{{Name: "make demo", Seconds: 1200}}},
	}}
	right := "**Expect 5.0 to 20.0 minutes** (first runs 2026-11-23 to 2026-11-26). Cold: `make demo` 600 s, `.ci/run` 900 s " +
		"(cold, aaaaaaa, 2026-11-23). Warm: `make demo` 12 s (warm, bbbbbbb, 2026-11-25)."
	if errs := doctest.CheckTimes("ok.md", right, times, "t.json"); len(errs) != 0 {
		t.Errorf("the right section: %v", errs)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"a run not in the file", strings.Replace(right, "bbbbbbb", "ccccccc", 1), "has no warm run of ccccccc"},
		{"a wrong figure", strings.Replace(right, "`make demo` 12 s", "`make demo` 11 s", 1), "says 12 s"},
		{"a wrong total", strings.Replace(right, "900 s", "901 s", 1), "says 900 s"},
		{"a step the run lacks", strings.Replace(right, "`make demo` 12 s", "`make test` 12 s", 1), `no green step "make test"`},
		{"cold where the run is warm", strings.Replace(right, "(warm, bbbbbbb", "(cold, bbbbbbb", 1), "has no cold run of bbbbbbb"},
		{"a figure without its run", right + " Then `make demo` 12 s.", "no \"(cold|warm, commit, date)\" after it"},
		{"a time of no step", strings.Replace(right, "Warm:", "Warm (13 s):", 1), "4 times in seconds, 3 of them"},
		{"a wrong range", strings.Replace(right, "5.0 to 20.0", "10 to 20", 1), "say 5.0 to 20.0 minutes, 2026-11-23 to 2026-11-26"},
		{"a wrong date in the range", strings.Replace(right, "to 2026-11-26", "to 2026-11-27", 1), "say 5.0 to 20.0 minutes, 2026-11-23 to 2026-11-26"},
		{"no range", strings.Replace(right, "Expect", "About", 1), "no \"Expect A to B minutes"},
	} {
		errs := doctest.CheckTimes("wrong.md", tc.text, times, "t.json")
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, errs, tc.want)
		} else {
			t.Logf("%s: caught: %v", tc.name, errs[0])
		}
	}
	bad := times
	bad.Runs = append([]doctest.CIRun{{Commit: "xyz", Date: "2026-11-23", Kind: "cold", Total: 1}}, times.Runs...)
	if errs := doctest.CheckTimes("ok.md", right, bad, "t.json"); len(errs) == 0 || !strings.Contains(errs[0].Error(), `commit "xyz"`) {
		t.Errorf("a run with a malformed commit: %v, want it named", errs)
	}
}
