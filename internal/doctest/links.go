package doctest

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

var (
	// codeSpan is an inline code span (its links are not links).
	codeSpan = regexp.MustCompile("(`+)[^`].*?(`+)")
	// inlineLink is [text](target) or ![alt](target), with an optional title.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()<>\s]+(?:\([^()\s]*\))?[^()<>\s]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef is a link reference definition: [label]: target.
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// autolink is <https://...>.
	autolink = regexp.MustCompile(`<((?:https?|mailto):[^>\s]+)>`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	// htmlAnchor is an explicit anchor: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<a\s[^>]*(?:name|id)="([^"]+)"`)
	// mdLink within a heading: [text](target) renders as text.
	mdLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag = regexp.MustCompile(`<[^>]+>`)
)

// Link is one link of a Markdown file.
type Link struct {
	File   string
	Line   int
	Target string
}

func (l Link) String() string { return fmt.Sprintf("%s:%d: link %q", l.File, l.Line, l.Target) }

// Links returns the links of the Markdown file at path (inline links, images,
// reference definitions and autolinks), outside code blocks and code spans.
func Links(path string) ([]Link, error) {
	prose, err := Prose(path)
	if err != nil {
		return nil, err
	}
	var links []Link
	for i, line := range prose {
		line = codeSpan.ReplaceAllString(line, "")
		add := func(target string) { links = append(links, Link{File: path, Line: i + 1, Target: target}) }
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			add(m[1])
		}
		for _, m := range autolink.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	return links, nil
}

// Anchors returns the anchors of the Markdown file at path: the ids GitHub
// gives its headings, and explicit <a name> or id anchors.
func Anchors(path string) (map[string]bool, error) {
	prose, err := Prose(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, nil
}

// Slug is the anchor GitHub gives a heading: its rendered text lower-cased,
// every character but letters, digits, marks, '_', '-' and ' ' removed,
// spaces replaced by '-'.
func Slug(headingText string) string {
	text := mdLink.ReplaceAllString(headingText, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckLink returns what is wrong with a link, or nil. root is the
// repository's root: a relative link must name a file or directory inside it,
// and its #anchor a heading of the Markdown file it names; an external link
// must be a well-formed https (or http, mailto) URL. No network is used.
func CheckLink(root string, l Link) error {
	u, err := url.Parse(l.Target)
	if err != nil {
		return fmt.Errorf("%s: %v", l, err)
	}
	switch u.Scheme {
	case "https", "http":
		if u.Host == "" || strings.ContainsAny(u.Host, " _") || !strings.Contains(u.Host, ".") {
			return fmt.Errorf("%s: not a well-formed URL (no host name)", l)
		}
		return nil
	case "mailto":
		if !strings.Contains(u.Opaque, "@") {
			return fmt.Errorf("%s: not an e-mail address", l)
		}
		return nil
	case "":
	default:
		return fmt.Errorf("%s: scheme %q: use https:// or a path in the tree", l, u.Scheme)
	}
	if u.Host != "" || strings.HasPrefix(u.Path, "/") {
		return fmt.Errorf("%s: an absolute path: link files in the tree by their path relative to %s", l, filepath.Base(l.File))
	}
	target := l.File
	if u.Path != "" {
		target = filepath.Join(filepath.Dir(l.File), filepath.FromSlash(u.Path))
		absRoot, err := filepath.Abs(root)
		if err != nil {
			return err
		}
		absTarget, err := filepath.Abs(target)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(absRoot, absTarget); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s: points outside the repository", l)
		}
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("%s: %s does not exist", l, target)
		}
	}
	if u.Fragment == "" {
		return nil
	}
	if !strings.HasSuffix(target, ".md") {
		if strings.HasPrefix(u.Fragment, "L") {
			return nil // a line of a source file (#L12, #L12-L20)
		}
		return fmt.Errorf("%s: an anchor in a file that is not Markdown", l)
	}
	anchors, err := Anchors(target)
	if err != nil {
		return fmt.Errorf("%s: %v", l, err)
	}
	if !anchors[u.Fragment] {
		return fmt.Errorf("%s: %s has no heading with the anchor #%s", l, target, u.Fragment)
	}
	return nil
}

// FigureCite is a link that cites figures: a link to a heading of a
// Markdown file, and the figures (a number and its unit: "1.0 s", "72.6 min",
// "14 MB") of the sentence it ends or stands in, before it.
type FigureCite struct {
	Link
	Figures []string
}

var (
	// figure is a number with a unit of time, size or ratio.
	figure = regexp.MustCompile(`(?:^|[^\w.])(\d+(?:\.\d+)?)\s?(ms|s|min|MB|GB|KB|MiB|GiB|%)(?:\W|$)`)
	// sentenceEnd ends a sentence: ". " then a capital, or ": " (a list's lead-in).
	sentenceEnd = regexp.MustCompile(`[.!?] +[A-Z*(\[` + "`" + `]`)
	// mdAnchorLink is an inline link to a heading of a Markdown file.
	mdAnchorLink = regexp.MustCompile(`\]\(([^()\s#]*\.md)?#([^()\s]+)\)`)
)

// FigureCites returns the links of the Markdown file at path that cite
// figures: within a paragraph (a table row is one), the figures from the
// sentence's start, or the previous link, to the link (a link that cites
// none is left out).
func FigureCites(path string) ([]FigureCite, error) {
	prose, err := Prose(path)
	if err != nil {
		return nil, err
	}
	var cites []FigureCite
	var para []string
	start := 0
	flush := func() {
		text := strings.Join(para, "\n")
		// A code span holds no figure, and starts a sentence as a word does: "C" and blanks.
		text = codeSpan.ReplaceAllStringFunc(text, func(s string) string { return "C" + strings.Repeat(" ", len(s)-1) })
		prev := 0 // the end of the previous link: a link cites the figures after it
		for _, m := range mdAnchorLink.FindAllStringSubmatchIndex(text, -1) {
			from := prev
			prev = m[1]
			for _, e := range sentenceEnd.FindAllStringIndex(text[:m[0]], -1) {
				from = max(from, e[0]+1)
			}
			// The link's own text "[...]" belongs to the sentence; the figures are before its "(".
			var figs []string
			for _, f := range figure.FindAllStringSubmatch(text[from:m[0]], -1) {
				figs = append(figs, f[1]+" "+f[2])
			}
			if len(figs) == 0 {
				continue
			}
			target := "#" + text[m[4]:m[5]]
			if m[2] >= 0 {
				target = text[m[2]:m[3]] + target
			}
			line := start + strings.Count(text[:m[0]], "\n") + 1
			cites = append(cites, FigureCite{Link: Link{File: path, Line: line, Target: target}, Figures: figs})
		}
		para = nil
	}
	for i, line := range prose {
		if strings.TrimSpace(line) == "" || heading.MatchString(line) || strings.HasPrefix(strings.TrimSpace(line), "|") {
			flush()
			if strings.HasPrefix(strings.TrimSpace(line), "|") {
				start, para = i, []string{line}
				flush() // a table row is a paragraph of its own
			}
			continue
		}
		if len(para) == 0 {
			start = i
		}
		para = append(para, line)
	}
	flush()
	return cites, nil
}

// SectionText returns the text of the section of the Markdown file at path
// whose heading has the anchor: from that heading to the next heading of
// the same or a higher level.
func SectionText(path, anchor string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, prose, err := parse(path, data)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(data), "\n")
	seen := map[string]int{}
	level, from := 0, -1
	for i, line := range prose {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		l := len(strings.TrimLeft(line, " ")) - len(strings.TrimLeft(strings.TrimLeft(line, " "), "#"))
		if from >= 0 && l <= level {
			return strings.Join(lines[from:i], "\n"), nil
		}
		slug := Slug(m[1])
		id := slug
		if n := seen[slug]; n > 0 {
			id = fmt.Sprintf("%s-%d", slug, n)
		}
		seen[slug]++
		if from < 0 && id == anchor {
			level, from = l, i
		}
	}
	if from < 0 {
		return "", fmt.Errorf("%s has no heading with the anchor #%s", path, anchor)
	}
	return strings.Join(lines[from:], "\n"), nil
}

// CheckFigureCite returns what is wrong with a link that cites figures, or
// nil: each figure's number must be in the section the link names (a
// figure in minutes may be there in seconds, "72.6 min" as "4358 s").
func CheckFigureCite(root string, c FigureCite) error {
	u, err := url.Parse(c.Target)
	if err != nil {
		return fmt.Errorf("%s: %v", c.Link, err)
	}
	target := c.File
	if u.Path != "" {
		target = filepath.Join(filepath.Dir(c.File), filepath.FromSlash(u.Path))
	}
	section, err := SectionText(target, u.Fragment)
	if err != nil {
		return fmt.Errorf("%s: %v", c.Link, err)
	}
	var numbers []string
	for _, m := range number.FindAllStringSubmatch(section, -1) {
		numbers = append(numbers, strings.ReplaceAll(m[1], ",", ""))
	}
	var missing []string
	for _, f := range c.Figures {
		num, unit, _ := strings.Cut(f, " ")
		if slices.ContainsFunc(numbers, func(n string) bool { return roundsTo(n, num) }) {
			continue
		}
		if unit == "min" && inSeconds(section, num) {
			continue
		}
		missing = append(missing, f)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s cites %s, which the section #%s of %s does not give: link the section that has the figure, or correct it",
			c.Link, strings.Join(missing, ", "), u.Fragment, target)
	}
	return nil
}

// number is a number in a section's text ("1.004", "14,114,978").
var number = regexp.MustCompile(`(?:^|[^\d.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)`)

// roundsTo reports whether the number n of a section, rounded to the
// decimals of the cited figure c, is c: "16.67" cited as "16.7", "1.004" as "1.0".
func roundsTo(n, c string) bool {
	if n == c {
		return true
	}
	decimals := 0
	if i := strings.IndexByte(c, '.'); i >= 0 {
		decimals = len(c) - i - 1
	}
	if i := strings.IndexByte(n, '.'); i < 0 || len(n)-i-1 <= decimals {
		return false // only a more precise number rounds to the figure
	}
	v, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false
	}
	return strconv.FormatFloat(v, 'f', decimals, 64) == c
}

// seconds is a time in seconds in a section.
var seconds = regexp.MustCompile(`(?:^|[^\w.])(\d+) s\b`)

// inSeconds reports whether the section gives, in seconds, the minutes
// min (to its precision: "72.6" is 4353 s to 4358 s).
func inSeconds(section, min string) bool {
	m, err := strconv.ParseFloat(min, 64)
	if err != nil {
		return false
	}
	prec := 1.0
	if i := strings.IndexByte(min, '.'); i >= 0 {
		prec = math.Pow(10, -float64(len(min)-i-1))
	}
	for _, s := range seconds.FindAllStringSubmatch(section, -1) {
		v, _ := strconv.ParseFloat(s[1], 64)
		if math.Abs(v/60-m) <= prec/2+1e-9 {
			return true
		}
	}
	return false
}
