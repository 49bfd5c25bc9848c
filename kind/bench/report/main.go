// Command report turns the results the benchmarks and the end-to-end suites
// write into tables (internal/mdtable), and picks out of `go test -json`
// logs (test2json events) what a make target prints: the Makefile's and kind/'s scripts call
// it instead of parsing text themselves. Not part of the image's binary.
//
//	report bench -dir DIR                 DIR/results.tsv (figure rows) → DIR/table.tsv, DIR/results.md, the table on stdout
//	report retry -dir DIR MINOR...        DIR/<minor>.tsv → version × figure, DIR/table.md and stdout
//	report matrix -dir DIR MINOR...       DIR/<minor>.json, .rc (make e2e as test2json) → version × case and measured times, DIR/table.md and stdout
//	report cases LOG                      each test's result in a go test -json log, as "--- PASS/FAIL/SKIP" lines
//	report failures [-n N] [-figures] LOG the "--- FAIL" lines and test log lines of a go test -json log, the last N
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = "usage: report bench|retry|matrix|cases|failures [flags] [args] (see kind/bench/report/main.go)"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("report "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the directory of the results (bench, retry, matrix)")
	n := fs.Int("n", 20, "failures: print at most the last n lines")
	figures := fs.Bool("figures", false, "failures: also the tests' \"figure ...\" log lines")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var err error
	switch args[0] {
	case "bench":
		err = benchTable(*dir, stdout)
	case "retry":
		err = retryTable(*dir, fs.Args(), stdout)
	case "matrix":
		err = matrixTables(*dir, fs.Args(), stdout)
	case "cases", "failures":
		if fs.NArg() != 1 {
			fmt.Fprintf(stderr, "report %s: want one go test -json log\n", args[0])
			return 2
		}
		err = printLog(args[0], fs.Arg(0), *n, *figures, stdout)
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "report %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// printLog prints a go test -json log's cases or failures (report cases, report failures).
func printLog(cmd, path string, n int, figures bool, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	l, err := readGoTestLog(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if cmd == "cases" {
		for _, c := range l.cases {
			fmt.Fprintln(w, "    "+c.line())
		}
		return nil
	}
	for _, o := range l.failures(n, figures) {
		fmt.Fprintln(w, o)
	}
	return nil
}
