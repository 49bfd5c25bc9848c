package main

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// TestClaims: sentences with something to check are claims, with the line
// they start on; headings, code blocks, tables, comments and marked regions
// are not read.
func TestClaims(t *testing.T) {
	prose, err := doctest.Prose("testdata/doc.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range Claims("doc.md", prose) {
		got = append(got, c.File+":"+strconv.Itoa(c.Line)+": "+c.Text)
	}
	want := []string{
		"doc.md:3: The registrar listens on 9808 by default.",
		"doc.md:4: The flag `--csi-address` is required.",
		"doc.md:6: `make demo` runs in 7 minutes.",
		"doc.md:28: A claim that spans two lines with 3 numbers e.g. 1, 2.",
		"doc.md:29: The last claim names docs/operating.md, and it is checked.",
	}
	if !slices.Equal(got, want) {
		t.Errorf("claims:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSample: the same seed draws the same claims, another seed others; a
// seed that is not a full commit hash is refused.
func TestSample(t *testing.T) {
	var claims []Claim
	for i := range 200 {
		claims = append(claims, Claim{File: "f.md", Line: i + 1, Text: "claim " + strconv.Itoa(i)})
	}
	const a, b = "73ce7b0184c503836571780919a85987e1b8d56f", "d844ab8000000000000000000000000000000000"
	s1, s2, s3 := Sample(claims, a, 10), Sample(claims, a, 10), Sample(claims, b, 10)
	if !slices.Equal(s1, s2) {
		t.Errorf("the same seed drew %v and %v", s1, s2)
	}
	if slices.Equal(s1, s3) {
		t.Errorf("seeds %s and %s drew the same sample %v", a, b, s1)
	}
	if !slices.IsSortedFunc(s1, func(x, y Claim) int { return x.Line - y.Line }) {
		t.Errorf("sample not in the docs' order: %v", s1)
	}
	if got := Sample(claims[:3], a, 10); len(got) != 3 {
		t.Errorf("10 of 3 claims drew %d", len(got))
	}
	for _, seed := range []string{"", "73ce7b0", "HEAD"} {
		if err := run("testdata", []string{"*.md"}, seed, 3, io.Discard); err == nil {
			t.Errorf("seed %q: no error", seed)
		}
	}
	var out strings.Builder
	if err := run("testdata", []string{"*.md"}, a, 2, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "# 2 of 5 claims in 1 files, seed "+a) {
		t.Errorf("output:\n%s", out.String())
	}
}
