package doctest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, prose, err := parse(path, data)
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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, prose, err := parse(path, data)
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
