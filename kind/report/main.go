// Command report turns the results the benchmarks and the end-to-end suites
// write into tables (internal/mdtable): the Makefile's and kind/'s scripts
// call it instead of rendering tables themselves. Not part of the image's binary.
//
//	report bench -dir DIR                 DIR/results.tsv (figure rows) → DIR/table.tsv, DIR/results.md, the table on stdout
//	report retry -dir DIR MINOR...        DIR/<minor>.tsv → version × figure, DIR/table.md and stdout
//	report matrix -dir DIR MINOR...       DIR/<minor>.log, .rc (make e2e) → version × case and measured times, DIR/table.md and stdout
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = "usage: report bench|retry|matrix [flags] [args] (see kind/report/main.go)"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("report "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the directory of the results (bench, retry, matrix)")
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
