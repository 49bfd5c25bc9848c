package proofmap

import (
	"fmt"
	"os"
	"strings"
)

// Kind is what a proof is.
type Kind string

const (
	// E2E is a test function of kind/e2e (build tag e2e).
	E2E Kind = "e2e"
	// PluginManager is a test function of the nested module kind/pluginmanager.
	PluginManager Kind = "pluginmanager"
	// Case is a case of kubectl csi-registrar verify (internal/drivercases).
	Case Kind = "case"
	// Target is a documented e2e* make target.
	Target Kind = "target"
)

// Kinds lists the kinds in the map's order.
var Kinds = []Kind{E2E, PluginManager, Case, Target}

// NotInCI starts the step cell of a proof that no .ci/run step runs; the
// rest of the cell says where it runs and why.
const NotInCI = "not in CI:"

// Expect is what a step must report for a proof it selects.
const (
	ExpectPass = "PASS"
	// ExpectSkip: the step selects the test but the test skips itself there
	// (the Note says why); it proves nothing in that step.
	ExpectSkip = "SKIP"
	ExpectNone = "-"
)

// Proof names one proof.
type Proof struct {
	Kind Kind
	Name string
}

func (p Proof) String() string { return string(p.Kind) + " " + p.Name }

// Row is one row of the map: a proof and one step that selects it (or
// NotInCI and where it runs).
type Row struct {
	Proof
	Step   string // a .ci/run step's name, or "" with Where for a proof outside CI
	Where  string // for a proof outside CI: the text after NotInCI
	Expect string // ExpectPass or ExpectSkip for a step; ExpectNone outside CI
	Note   string
	Line   int // in the map's file
}

// Map is the proof map.
type Map struct {
	File string
	Rows []Row
}

// The markers around the map's table in its Markdown file.
const (
	beginMarker = "<!-- proof-map -->"
	endMarker   = "<!-- /proof-map -->"
)

// Header is the map table's header row.
const Header = "| Proof | Kind | Step | Expect | Note |"

// ReadMap reads the proof map from a Markdown file: the table between
// <!-- proof-map --> and <!-- /proof-map -->.
func ReadMap(file string) (*Map, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return ParseMap(file, string(b))
}

// ParseMap parses the proof map out of a Markdown text.
func ParseMap(file, text string) (*Map, error) {
	lines := strings.Split(text, "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case beginMarker:
			begin = i
		case endMarker:
			end = i
		}
	}
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("%s: no proof map: want a table between %q and %q lines", file, beginMarker, endMarker)
	}
	m := &Map{File: file}
	seenHeader := false
	for i := begin + 1; i < end; i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if !seenHeader {
			if l != Header {
				return nil, fmt.Errorf("%s:%d: the proof map's header is %q, want %q", file, i+1, l, Header)
			}
			seenHeader = true
			continue
		}
		if strings.HasPrefix(l, "|--") || strings.HasPrefix(l, "| --") || strings.HasPrefix(l, "|:-") {
			continue
		}
		r, err := parseRow(l)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, i+1, err)
		}
		r.Line = i + 1
		m.Rows = append(m.Rows, r)
	}
	return m, nil
}

func parseRow(l string) (Row, error) {
	if !strings.HasPrefix(l, "|") || !strings.HasSuffix(l, "|") {
		return Row{}, fmt.Errorf("proof map row %q: want | Proof | Kind | Step | Expect | Note |", l)
	}
	cells := strings.Split(strings.Trim(l, "|"), "|")
	if len(cells) != 5 {
		return Row{}, fmt.Errorf("proof map row %q has %d cells, want 5 (| Proof | Kind | Step | Expect | Note |; no | inside a cell)", l, len(cells))
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	r := Row{Proof: Proof{Kind: Kind(cells[1]), Name: strings.Trim(cells[0], "`")}, Expect: cells[3], Note: cells[4]}
	if r.Name == "" {
		return r, fmt.Errorf("proof map row %q: no proof name", l)
	}
	known := false
	for _, k := range Kinds {
		known = known || k == r.Kind
	}
	if !known {
		return r, fmt.Errorf("proof map row %q: kind %q is not one of e2e, pluginmanager, case, target", l, r.Kind)
	}
	step := cells[2]
	switch {
	case strings.HasPrefix(step, NotInCI):
		r.Where = strings.TrimSpace(strings.TrimPrefix(step, NotInCI))
		if r.Where == "" {
			return r, fmt.Errorf("proof map row %q: %q without where it runs and why: write %q", l, NotInCI, NotInCI+" <where it runs and why>")
		}
		if r.Expect != ExpectNone {
			return r, fmt.Errorf("proof map row %q: a proof not in CI has Expect %q, want %q", l, r.Expect, ExpectNone)
		}
	case strings.HasPrefix(step, "`") && strings.HasSuffix(step, "`") && len(step) > 2:
		r.Step = strings.Trim(step, "`")
		if r.Expect != ExpectPass && r.Expect != ExpectSkip {
			return r, fmt.Errorf("proof map row %q: Expect %q, want %s (the step proves it) or %s (the test skips itself there; say why in Note)", l, r.Expect, ExpectPass, ExpectSkip)
		}
	default:
		return r, fmt.Errorf("proof map row %q: step %q: want a .ci/run step's name in backticks or %q", l, step, NotInCI+" <where it runs and why>")
	}
	return r, nil
}

// RowText is a row as it is written in the map.
func RowText(p Proof, step, expect, note string) string {
	if step == "" {
		step = NotInCI + " <where it runs and why>"
		expect = ExpectNone
	} else {
		step = "`" + step + "`"
	}
	return fmt.Sprintf("| `%s` | %s | %s | %s | %s |", p.Name, p.Kind, step, expect, note)
}
