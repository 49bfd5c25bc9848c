// Command citimes records a run's step times in docs/times.json, the file the
// README's build, demo and CI times come from (a test of internal/doctest
// compares them). It reads the output of .ci/run (at least its summary: the
// lines from "=== step times" to "=== total Ns") on standard input:
//
//	./.ci/run 2>&1 | tee ci.log
//	go run ./internal/doctest/citimes -kind warm -commit $(git rev-parse --short HEAD) \
//	    -date $(date -u +%F) -note 'fresh clone, warm caches, 2 cores' < ci.log
//
// A run of the same commit, date and kind is replaced.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

func main() {
	var run doctest.CIRun
	file := flag.String("file", "docs/times.json", "the times file to update (created when absent)")
	flag.StringVar(&run.Commit, "commit", "", "the commit the run measured (required; \"unknown\" for none stated)")
	flag.StringVar(&run.Date, "date", "", "the day of the run, YYYY-MM-DD (required)")
	flag.StringVar(&run.Kind, "kind", "", "cold (nothing cached: empty HOME, GOCACHE, GOMODCACHE) or warm (required)")
	flag.StringVar(&run.Note, "note", "", "the machine, what was cached, anything a reader needs to compare the run (required)")
	flag.Parse()
	if err := record(*file, run, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "citimes:", err)
		os.Exit(2)
	}
}

// record adds run, its steps read from in (.ci/run's output), to the times
// file, and reports what it wrote on out.
func record(file string, run doctest.CIRun, in io.Reader, out io.Writer) error {
	if run.Commit == "unknown" {
		run.Commit = ""
	} else if run.Commit == "" {
		return fmt.Errorf("-commit is required: the commit the run measured (-commit unknown when it was not stated)")
	}
	if run.Note == "" {
		return fmt.Errorf("-note is required: the machine and what was cached")
	}
	steps, total, err := doctest.ParseStepTimes(in)
	if err != nil {
		return fmt.Errorf("standard input: %w", err)
	}
	run.Steps, run.Total = steps, total
	if err := run.Validate(); err != nil {
		return err
	}
	var t doctest.Times
	if _, err := os.Stat(file); err == nil {
		if t, err = doctest.ReadTimes(file); err != nil {
			return err
		}
	}
	t.Add(run)
	b, err := t.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %s run of %s on %s: %d steps, total %d s\n", file, run.Kind, run.Commit, run.Date, len(run.Steps), run.Total)
	return nil
}
