package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/mdtable"
)

// benchHeader is the header of make bench's table; results.tsv holds its rows.
var benchHeader = []string{"figure", "what", "runs", "ours: min / median / max", "goal", "verdict",
	"upstream: min / median / max", "ours/upstream"}

// benchTable reads dir/results.tsv (one row a figure, as the benchmarks
// append them), sorts it by figure (1, 2, 5a, 5c, 10: as sort -V) and
// writes dir/table.tsv and dir/results.md, and the table, aligned, to w.
// A missing results.tsv (no benchmark got as far) gives a table of no rows.
func benchTable(dir string, w io.Writer) error {
	rows, err := readTSV(filepath.Join(dir, "results.tsv"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	sort.SliceStable(rows, func(i, j int) bool { return versionLess(rows[i][0], rows[j][0]) })
	tb := mdtable.Table{Header: benchHeader, Rows: rows}
	var tsv strings.Builder
	for _, r := range append([][]string{tb.Header}, rows...) {
		tsv.WriteString(strings.Join(r, "\t") + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "table.tsv"), []byte(tsv.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(tb.Markdown()), 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprint(w, "\n"+tb.Text()+"\n")
	return err
}

// readTSV returns the non-empty lines of a tab-separated file, split.
func readTSV(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			rows = append(rows, strings.Split(l, "\t"))
		}
	}
	return rows, nil
}

var digits = regexp.MustCompile(`[0-9]+|[^0-9]+`)

// versionLess orders as sort -V: runs of digits by their value, the rest as text.
func versionLess(a, b string) bool {
	pa, pb := digits.FindAllString(a, -1), digits.FindAllString(b, -1)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// kubeletPrefix is the part of a figure's text that names the kubelet's
// version, dropped so that a figure is one row across the versions.
var kubeletPrefix = regexp.MustCompile(`^kubelet v[0-9.]+(, |: )`)

// retryTable: make bench-retry's version × figure table, from each
// version's dir/<minor>.tsv (figure, what, runs, value, ...); a rate ("/ min"
// in the figure's text) without its " s". Written to dir/table.md and w.
func retryTable(dir string, versions []string, w io.Writer) error {
	tb := mdtable.Table{Header: []string{"figure"}}
	var keys []string
	val := map[[2]string]string{}
	for _, v := range versions {
		rows, err := readTSV(filepath.Join(dir, v+".tsv"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the version's run failed before its figure
		} else if err != nil {
			return err
		}
		tb.Header = append(tb.Header, v)
		for _, r := range rows {
			if len(r) < 4 {
				continue
			}
			what := kubeletPrefix.ReplaceAllString(r[1], "")
			k, x := r[0]+" "+what, r[3]
			if strings.Contains(what, "/ min") {
				x = strings.TrimSuffix(x, " s")
			}
			if _, ok := val[[2]string{k, ""}]; !ok {
				val[[2]string{k, ""}] = ""
				keys = append(keys, k)
			}
			val[[2]string{k, v}] = x
		}
	}
	for _, k := range keys {
		row := []string{k}
		for _, v := range tb.Header[1:] {
			row = append(row, orDash(val[[2]string{k, v}]))
		}
		tb.Rows = append(tb.Rows, row)
	}
	return writeTables(filepath.Join(dir, "table.md"), w, tb)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeTables writes the tables, in Markdown and a blank line apart, to
// path and w (as tee does).
func writeTables(path string, w io.Writer, tbs ...mdtable.Table) error {
	var b strings.Builder
	for i, tb := range tbs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(tb.Markdown())
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// The suite's closing block of every time it measured (kind/e2e's
// printTimings): "scope  seconds  what" lines up to a blank line.
const timesHeading = "==== measured times (seconds) ===="

var timesLine = regexp.MustCompile(`^([^ ]+) +([^ ]+) +(.+)$`)

// matrixTables: make e2e-matrix's tables, from each version's dir/<minor>.json
// (make e2e's output as test2json events) and dir/<minor>.rc (its exit code): version × case →
// result and duration, then version × every time the suite measured.
// Written to dir/table.md and w.
func matrixTables(dir string, versions []string, w io.Writer) error {
	var vs, cases, times []string
	result, measured, rc := map[[2]string]string{}, map[[2]string]string{}, map[string]string{}
	for _, v := range versions {
		f, err := os.Open(filepath.Join(dir, v+".json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		l, err := readGoTestLog(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s.json: %w", v, err)
		}
		vs = append(vs, v)
		rc[v] = "?"
		if c, err := os.ReadFile(filepath.Join(dir, v+".rc")); err == nil {
			rc[v] = strings.TrimRight(strings.SplitN(string(c), "\n", 2)[0], "\r")
		}
		for _, c := range l.cases {
			if _, ok := result[[2]string{c.name, ""}]; !ok {
				result[[2]string{c.name, ""}] = ""
				cases = append(cases, c.name)
			}
			result[[2]string{c.name, v}] = c.result + " " + c.duration
		}
		in := false
		for _, o := range l.output {
			switch {
			case strings.HasPrefix(o, timesHeading):
				in = true
			case in && strings.TrimSpace(o) == "":
				in = false
			case in:
				m := timesLine.FindStringSubmatch(o)
				if m == nil {
					continue
				}
				k := m[1] + " | " + m[3]
				if _, ok := measured[[2]string{k, ""}]; !ok {
					measured[[2]string{k, ""}] = ""
					times = append(times, k)
				}
				if prev := measured[[2]string{k, v}]; prev != "" {
					measured[[2]string{k, v}] = prev + ", " + m[2]
				} else {
					measured[[2]string{k, v}] = m[2]
				}
			}
		}
	}
	byCase := mdtable.Table{Header: append([]string{"case"}, vs...)}
	for _, c := range cases {
		row := []string{c}
		for _, v := range vs {
			row = append(row, orDash(result[[2]string{c, v}]))
		}
		byCase.Rows = append(byCase.Rows, row)
	}
	exit := []string{"make e2e exit"}
	for _, v := range vs {
		exit = append(exit, rc[v])
	}
	byCase.Rows = append(byCase.Rows, exit)
	byTime := mdtable.Table{Header: append([]string{"case", "measured (s)"}, vs...)}
	for _, k := range times {
		scope, what, _ := strings.Cut(k, " | ")
		row := []string{scope, what}
		for _, v := range vs {
			row = append(row, orDash(measured[[2]string{k, v}]))
		}
		byTime.Rows = append(byTime.Rows, row)
	}
	return writeTables(filepath.Join(dir, "table.md"), w, byCase, byTime)
}
