// Command proofcheck prints, for every proof the proof map
// (docs/development.md) gives a step of .ci/run, its verdict in the run
// kept in -dir (each step's output, exit code and go test -json; see
// internal/proofmap), and exits 1 when one is FAIL or MISSING.
//
//	go run ./internal/proofmap/cmd/proofcheck [-dir bin/ci] [-map docs/development.md]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/csi-registrar/csi-registrar/internal/proofmap"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proofcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "bin/ci", "the run's proof directory (.ci/run's PROOF_DIR)")
	mapFile := fs.String("map", "docs/development.md", "the Markdown file with the proof map")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	m, err := proofmap.ReadMap(*mapFile)
	if err != nil {
		fmt.Fprintln(stderr, "proofcheck:", err)
		return 2
	}
	runs := map[string]proofmap.StepRun{}
	bad, checked := 0, 0
	tw := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "proof \t step \t verdict")
	for _, r := range m.Rows {
		if r.Step == "" {
			continue
		}
		s, ok := runs[r.Step]
		if !ok {
			if s, err = proofmap.ReadStep(*dir, r.Step); err != nil {
				fmt.Fprintln(stderr, "proofcheck:", err)
				return 2
			}
			runs[r.Step] = s
		}
		v, why := proofmap.Verdict(r, s)
		switch v {
		case proofmap.Fail, proofmap.Missing:
			bad++
		case proofmap.NotChosen:
		default:
			checked++
		}
		if why != "" {
			why = " (" + why + ")"
		}
		fmt.Fprintf(tw, "%s \t %s \t %s%s\n", r.Proof, r.Step, v, why)
	}
	tw.Flush()
	if bad == 0 && checked == 0 {
		fmt.Fprintf(stderr, "proofcheck: no proof of the map was run in %s: is it a .ci/run run's proof directory?\n", *dir)
		return 1
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "proofcheck: %d proofs mapped to this run did not pass (FAIL or MISSING above; the map: %s)\n", bad, *mapFile)
		return 1
	}
	fmt.Fprintf(stdout, "proofcheck: every proof mapped to this run passed (%d)\n", checked)
	return 0
}
