// Package mdtable renders a table as Markdown (the tables of docs/ and of
// the suites' and benchmarks' results files) and as aligned text for a
// terminal (as `column -t` aligns it). The one table renderer of the
// repository: the driver suite (kind/e2e) and kind/bench/report use it.
package mdtable

import (
	"strings"
	"unicode/utf8"
)

// Table is a header and rows of cells. A row shorter than the header is
// padded with empty cells.
type Table struct {
	Header []string
	Rows   [][]string
}

// width is the number of columns: the longest of the header and the rows.
func (t Table) width() int {
	n := len(t.Header)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	return n
}

func cell(r []string, i int) string {
	if i < len(r) {
		return r[i]
	}
	return ""
}

// Markdown returns the table as a Markdown (GitHub) table: "| a | b |"
// lines, the header's followed by "|---|---|".
func (t Table) Markdown() string {
	n := t.width()
	var b strings.Builder
	line := func(r []string) {
		b.WriteString("|")
		for i := range n {
			b.WriteString(" " + cell(r, i) + " |")
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|" + strings.Repeat("---|", n) + "\n")
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}

// Text returns the table with its columns aligned, two spaces apart, the
// last column not padded (as `column -t -s TAB` prints a TSV file: empty
// cells kept, so a row may end in spaces).
func (t Table) Text() string {
	n := t.width()
	rows := append([][]string{t.Header}, t.Rows...)
	widths := make([]int, n)
	for _, r := range rows {
		for i := range n {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell(r, i)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i := range n {
			c := cell(r, i)
			b.WriteString(c)
			if i < n-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
