package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeMap(t *testing.T, rows ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "map.md")
	text := "<!-- proof-map -->\n| Proof | Kind | Step | Expect | Note |\n|---|---|---|---|---|\n" +
		strings.Join(rows, "\n") + "\n<!-- /proof-map -->\n"
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// The run of ../../testdata/run (see TestVerdicts): exit 0 when every
// mapped proof passed, 1 with a FAIL or MISSING, each row printed.
func TestRun(t *testing.T) {
	const dir = "../../testdata/run"
	for _, c := range []struct {
		rows []string
		code int
		want []string
	}{
		{[]string{
			"| `TestPasses` | e2e | `make e2e` | PASS | |",
			"| `TestSkips` | e2e | `make e2e` | SKIP | skips itself |",
			"| `R1_mode_manifests` | case | `make e2e-notready` | PASS | |",
			"| `TestGone` | e2e | not in CI: nowhere | - | |",
		}, 0, []string{"e2e TestPasses", "make e2e", "PASS", "SKIP", "every proof mapped to this run passed"}},
		{[]string{
			"| `TestPasses` | e2e | `make e2e` | PASS | |",
			"| `TestFails` | e2e | `make e2e` | PASS | |",
			"| `e2e-kind` | target | `make e2e-kind` | PASS | |",
		}, 1, []string{"e2e TestFails", "FAIL", "target e2e-kind", "MISSING"}},
		// A step of a slice this run did not choose fails nothing...
		{[]string{
			"| `TestPasses` | e2e | `make e2e` | PASS | |",
			"| `e2e-storage` | target | `make e2e-storage` | PASS | |",
		}, 0, []string{"target e2e-storage", "NOT IN THIS RUN (slice 3, another run's)", "passed (1)"}},
		// ...but a run that proved nothing of the map fails.
		{[]string{
			"| `e2e-storage` | target | `make e2e-storage` | PASS | |",
		}, 1, []string{"NOT IN THIS RUN"}},
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"-dir", dir, "-map", writeMap(t, c.rows...)}, &out, &errOut)
		if code != c.code {
			t.Errorf("exit %d, want %d; output:\n%s%s", code, c.code, out.String(), errOut.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, out.String())
			}
		}
	}
}
