// Command claimsample draws a sample of the checkable claims the docs make in
// prose, for a reader to check by hand against the code, the tests and what
// the commands print:
//
//	go run ./internal/doctest/claimsample -seed $(git rev-parse HEAD) -n 60
//
// It reads README.md, CHANGELOG.md, docs/*.md and manifests/chart/README.md,
// skipping code blocks, headings, tables, HTML comments and the regions
// between marker comments (`<!-- proof-map -->` to `<!-- /proof-map -->`, or
// to `<!-- end of ... -->`): those are read by the tests of internal/doctest.
// The rest is split into sentences; a sentence is a claim when it names
// something to check: a number, a flag, a make target, a file, a metric, or
// says always, never, only, every or default. The sample is drawn from a
// random source seeded with the commit, so the same commit draws the same
// sample and nobody picks the claims.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// docs are the files read, as globs relative to the repository's top.
var docs = []string{"README.md", "CHANGELOG.md", "docs/*.md", "manifests/chart/README.md"}

func main() {
	root := flag.String("root", ".", "the repository's top directory")
	seed := flag.String("seed", "", "the commit the sample is drawn for, the full hash (git rev-parse HEAD; required)")
	n := flag.Int("n", 60, "how many claims to draw")
	flag.Parse()
	if err := run(*root, docs, *seed, *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "claimsample:", err)
		os.Exit(2)
	}
}

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// run draws n claims of the files matching globs under root and prints them.
func run(root string, globs []string, seed string, n int, out io.Writer) error {
	if !commitHash.MatchString(seed) {
		return fmt.Errorf("-seed %q is not a full commit hash (40 lowercase hex digits): pass $(git rev-parse HEAD)", seed)
	}
	if n < 1 {
		return fmt.Errorf("-n %d: draw at least 1 claim", n)
	}
	var all []Claim
	for _, g := range globs {
		paths, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return err
		}
		if len(paths) == 0 {
			return fmt.Errorf("%s: no file matches under %s", g, root)
		}
		for _, p := range paths { // Glob sorts them
			prose, err := doctest.Prose(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			all = append(all, Claims(filepath.ToSlash(rel), prose)...)
		}
	}
	picked := Sample(all, seed, n)
	fmt.Fprintf(out, "# %d of %d claims in %d files, seed %s\n", len(picked), len(all), countFiles(all), seed)
	for i, c := range picked {
		fmt.Fprintf(out, "%2d. %s:%d: %s\n", i+1, c.File, c.Line, c.Text)
	}
	return nil
}

func countFiles(cs []Claim) int {
	files := map[string]bool{}
	for _, c := range cs {
		files[c.File] = true
	}
	return len(files)
}

// Claim is one sentence of prose that says something a reader can check.
type Claim struct {
	File string
	Line int // the line the sentence starts on, 1-based
	Text string
}

// Sample returns n of claims (all of them when there are fewer), drawn by a
// PCG source seeded with the SHA-256 of seed, in the order of the docs.
func Sample(claims []Claim, seed string, n int) []Claim {
	sum := sha256.Sum256([]byte(seed))
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
	idx := r.Perm(len(claims))[:min(n, len(claims))]
	slices.Sort(idx)
	out := make([]Claim, len(idx))
	for i, j := range idx {
		out[i] = claims[j]
	}
	return out
}

var (
	listItem  = regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s+`)
	comment   = regexp.MustCompile(`<!--.*?-->`)
	opening   = regexp.MustCompile(`^<!--\s*([^/:]+?)(?::.*)?\s*-->$`)
	checkable = regexp.MustCompile(`[0-9]|--[a-z]|\bmake [a-z]|\w/\w|\.(?:go|md|ya?ml|json|sh|sock)\b|\bcsi_registrar_|(?i)\b(?:always|never|only|every|default)`)
)

// Claims returns the checkable sentences of a file's prose (doctest.Prose).
func Claims(file string, prose []string) []Claim {
	var (
		claims []Claim
		para   strings.Builder
		starts []int // the offset in para where each line begins
		lines  []int // and its line number
	)
	flush := func() {
		for _, s := range sentences(para.String()) {
			i, _ := slices.BinarySearch(starts, s.off+1)
			if c := strings.TrimSpace(s.text); checkable.MatchString(c) && len(strings.Fields(c)) >= 4 {
				claims = append(claims, Claim{File: file, Line: lines[i-1], Text: c})
			}
		}
		para.Reset()
		starts, lines = starts[:0], lines[:0]
	}
	for i := 0; i < len(prose); i++ {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(prose[i]), ">"))
		if m := opening.FindStringSubmatch(line); m != nil {
			if end := regionEnd(prose, i, strings.TrimSpace(m[1])); end > i {
				i = end
			}
			flush()
			continue
		}
		if strings.HasPrefix(line, "<!--") && !strings.Contains(line, "-->") {
			for i < len(prose) && !strings.Contains(prose[i], "-->") {
				i++
			}
			flush()
			continue
		}
		line = strings.TrimSpace(comment.ReplaceAllString(line, ""))
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "|") {
			flush()
			continue
		}
		if listItem.MatchString(line) {
			flush()
			line = listItem.ReplaceAllString(line, "")
		}
		starts, lines = append(starts, para.Len()), append(lines, i+1)
		para.WriteString(line + " ")
	}
	flush()
	return claims
}

// regionEnd returns the index of the line that closes the marker region
// opened at line i, or -1 when the comment opens none.
func regionEnd(prose []string, i int, name string) int {
	for j := i + 1; j < len(prose); j++ {
		l := strings.TrimSpace(prose[j])
		if l == "<!-- /"+name+" -->" || strings.HasPrefix(l, "<!-- end of "+name) {
			return j
		}
	}
	return -1
}

type sentence struct {
	off  int
	text string
}

// sentences splits a paragraph after '.', '!' or '?' followed by a space and
// a capital, a code span, a link or a bold word, outside code spans.
func sentences(p string) []sentence {
	var out []sentence
	start, code := 0, false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '`':
			code = !code
		case !code && (c == '.' || c == '!' || c == '?') && i+2 < len(p) && p[i+1] == ' ' && strings.ContainsAny(p[i+2:i+3], "ABCDEFGHIJKLMNOPQRSTUVWXYZ`[*("):
			out = append(out, sentence{start, p[start : i+1]})
			start = i + 2
		}
	}
	if strings.TrimSpace(p[start:]) != "" {
		out = append(out, sentence{start, p[start:]})
	}
	return out
}
