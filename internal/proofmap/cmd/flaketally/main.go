// Command flaketally prints the failure rate per test of the runs make
// flake-check keeps in a directory: each e2e-<n>.json (go test -json of
// one run of make e2e) and each verify-<n>.log (one run of verify's
// cases), one row a test or case: runs, failures, skips, the rate; and one
// row a kind of run for the runs' exit codes (<kind>-<n>.rc: a run that
// exited non-zero, or whose code is missing, failed even when no test or
// case says so, e.g. verify refusing a cluster before its first case). It
// exits 1 when a test or a run failed.
//
//	go run ./internal/proofmap/cmd/flaketally bin/flake
package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/csi-registrar/csi-registrar/internal/proofmap"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// tally is one test's or case's outcomes over the runs.
type tally struct{ runs, fails, skips int }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: flaketally DIR (make flake-check's output directory, e.g. bin/flake)")
		return 2
	}
	dir := args[0]
	rows := map[string]*tally{}
	add := func(name string, verdicts []string) {
		r := rows[name]
		if r == nil {
			r = &tally{}
			rows[name] = r
		}
		r.runs++
		for _, v := range verdicts {
			switch v {
			case "fail", "FAIL", "COULD NOT CHECK":
				r.fails++
				return
			}
		}
		for _, v := range verdicts {
			if v == "pass" || v == "PASS" {
				return
			}
		}
		r.skips++
	}
	jsons, _ := filepath.Glob(filepath.Join(dir, "e2e-*.json"))
	logs, _ := filepath.Glob(filepath.Join(dir, "verify-*.log"))
	if len(jsons)+len(logs) == 0 {
		fmt.Fprintf(stderr, "flaketally: %s holds no e2e-<n>.json or verify-<n>.log: give the directory make flake-check wrote (bin/flake)\n", dir)
		return 2
	}
	for _, f := range jsons {
		acts, err := proofmap.TestActions(f)
		if err != nil {
			fmt.Fprintln(stderr, "flaketally:", err)
			return 2
		}
		for name, v := range acts {
			add("e2e "+name, v)
		}
	}
	for kind, files := range map[string][]string{"e2e": jsons, "verify": logs} {
		for _, f := range files {
			add("exit of each "+kind+" run", []string{exitVerdict(strings.TrimSuffix(f, filepath.Ext(f)) + ".rc")})
		}
	}
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(stderr, "flaketally:", err)
			return 2
		}
		for name, v := range proofmap.CaseVerdicts(string(b)) {
			add("case "+name, v)
		}
	}
	names := slices.Sorted(maps.Keys(rows))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "test\truns\tfailed\tskipped\tfailure rate\n")
	failed := 0
	for _, n := range names {
		r := rows[n]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f%%\n", n, r.runs, r.fails, r.skips, 100*float64(r.fails)/float64(r.runs))
		if r.fails > 0 {
			failed++
		}
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d e2e runs, %d verify runs; %d of %d tests or cases failed at least once\n", len(jsons), len(logs), failed, len(names))
	if failed > 0 {
		return 1
	}
	return 0
}

// exitVerdict is "pass" when the file rc holds exit code 0, else "fail"
// (another code, or no code recorded: the run did not end as it should).
func exitVerdict(rc string) string {
	b, err := os.ReadFile(rc)
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		return "fail"
	}
	return "pass"
}
