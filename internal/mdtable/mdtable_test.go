package mdtable_test

import (
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/mdtable"
)

func TestMarkdown(t *testing.T) {
	tb := mdtable.Table{Header: []string{"figure", "what", "verdict"}, Rows: [][]string{{"1", "start", "pass"}, {"2"}}}
	want := "| figure | what | verdict |\n|---|---|---|\n| 1 | start | pass |\n| 2 |  |  |\n"
	if got := tb.Markdown(); got != want {
		t.Errorf("Markdown() =\n%s\nwant\n%s", got, want)
	}
}

// TestText: aligned as column -t -s TAB aligns (display width, empty cells
// kept, the last column not padded).
func TestText(t *testing.T) {
	tb := mdtable.Table{Header: []string{"a", "", "c"}, Rows: [][]string{{"long–x", "b", "c"}, {"x", "", ""}}}
	want := "a          c\nlong–x  b  c\nx          \n"
	if got := tb.Text(); got != want {
		t.Errorf("Text() =\n%q\nwant\n%q", got, want)
	}
}
