package doctest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// TestDocsFigureLinks: a link to a section that cites figures (the figures
// of its sentence before it) links a section that gives them, in every
// Markdown file of the tree.
func TestDocsFigureLinks(t *testing.T) {
	t.Logf("%d links citing figures checked", checkEachInMarkdown(t, doctest.FigureCites, doctest.CheckFigureCite))
}

// TestFigureLinksCaught: a link cites the figures of its sentence before
// it (after an earlier link of the sentence); a figure the linked section
// does not give fails, one it gives (rounded, or in seconds for minutes)
// passes.
func TestFigureLinksCaught(t *testing.T) {
	figures := "# Figures\n\n## Rollouts\n\nUnregistered 1.004 s, then 16.67 s; CI took 4358 s; 14,114,978 bytes.\n\n### Detail\n\nA subsection: 7.5 s.\n\n## Other\n\n63 s here.\n"
	for _, tc := range []struct {
		name, page string
		ok         bool
	}{
		{"exact and rounded", "It took 1.0 s and 16.7 s ([how](f.md#rollouts)).", true},
		{"minutes as seconds", "CI took 72.6 min ([measured](f.md#rollouts)).", true},
		{"in a subsection", "A detail: 7.5 s ([here](f.md#rollouts)).", true},
		{"a figure of another section", "It took 63 s ([how](f.md#rollouts)).", false},
		{"a wrong figure", "It took 2.0 s ([how](f.md#rollouts)).", false},
		{"a wrong rounding", "It took 16.6 s ([how](f.md#rollouts)).", false},
		{"wrong minutes", "CI took 70.1 min ([measured](f.md#rollouts)).", false},
		{"a second link cites what follows the first", "1.0 s ([a](f.md#rollouts)), then 63 s ([b](f.md#other)).", true},
		{"the second link's figure wrong", "1.0 s ([a](f.md#rollouts)), then 64 s ([b](f.md#other)).", false},
		{"a figure in an earlier sentence is not cited", "It took 63 s. See [the rollouts](f.md#rollouts).", true},
		{"in a table row", "| x | 2.5 s ([how](f.md#rollouts)) |", false},
		{"a link without figures", "See [the rollouts](f.md#rollouts).", true},
	} {
		dir := write(t, map[string]string{"f.md": figures, "p.md": "# Page\n\n" + tc.page + "\n"})
		cites, err := doctest.FigureCites(filepath.Join(dir, "p.md"))
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		for _, c := range cites {
			if err := doctest.CheckFigureCite(dir, c); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 && !strings.Contains(errs[0].Error(), "p.md:3:") {
			t.Errorf("%s: %v, want it at p.md:3", tc.name, errs[0])
		}
		switch {
		case tc.ok && len(errs) != 0:
			t.Errorf("%s: %q: %v", tc.name, tc.page, errs)
		case !tc.ok && len(errs) == 0:
			t.Errorf("%s: %q passed (%d cites: %+v)", tc.name, tc.page, len(cites), cites)
		case !tc.ok:
			t.Logf("%s: caught: %v", tc.name, errs[0])
		}
	}
}
