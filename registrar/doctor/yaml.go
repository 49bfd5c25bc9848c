package doctor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// parseYAML reads the YAML subset kubeconfig files are written in: block
// mappings and sequences (including a sequence at its key's indentation, as
// kubectl writes them), plain, single- and double-quoted scalars, comments,
// and flow collections that are JSON ({}, [], {"a": 1}). A document that is
// JSON is read as JSON. Block scalars (| and >), anchors and tags are refused
// with an error. Values are map[string]any, []any, string or, from JSON,
// other JSON types.
//
// It exists so that the binary reads a kubeconfig without linking a YAML
// library (or client-go): see the README's "csi-registrar doctor" section.
func parseYAML(data []byte) (any, error) {
	if s := strings.TrimSpace(string(data)); strings.HasPrefix(s, "{") {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("JSON: %w", err)
		}
		return v, nil
	}
	var lines []yamlLine
	for n, raw := range strings.Split(string(data), "\n") {
		raw = strings.TrimRight(raw, "\r")
		text := strings.TrimRight(stripComment(raw), " \t")
		trimmed := strings.TrimLeft(text, " ")
		if trimmed == "" || trimmed == "---" || trimmed == "..." {
			continue
		}
		if strings.HasPrefix(trimmed, "\t") {
			return nil, fmt.Errorf("line %d: a tab in the indentation", n+1)
		}
		lines = append(lines, yamlLine{num: n + 1, indent: len(text) - len(trimmed), text: trimmed})
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := &yamlParser{lines: lines}
	v, err := p.node(lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.i < len(p.lines) {
		return nil, fmt.Errorf("line %d: unexpected indentation", p.lines[p.i].num)
	}
	return v, nil
}

type yamlLine struct {
	num    int // 1-based, for errors
	indent int
	text   string // without indentation and comment
}

type yamlParser struct {
	lines []yamlLine
	i     int
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// node parses the block that starts at the current line, at indent.
func (p *yamlParser) node(indent int) (any, error) {
	if isSeqItem(p.lines[p.i].text) {
		return p.sequence(indent)
	}
	if _, _, ok := splitKey(p.lines[p.i].text); !ok {
		l := p.lines[p.i]
		p.i++
		return scalar(l.text, l.num)
	}
	return p.mapping(indent)
}

func (p *yamlParser) sequence(indent int) ([]any, error) {
	items := []any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		rest := strings.TrimLeft(l.text[1:], " ")
		if rest == "" {
			p.i++
			v, err := p.child(indent)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
			continue
		}
		// "- key: v" opens a mapping whose keys sit where "key" starts:
		// parse the rest of the line as if it were a line of its own.
		p.lines[p.i] = yamlLine{num: l.num, indent: indent + len(l.text) - len(rest), text: rest}
		v, err := p.node(p.lines[p.i].indent)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
	return items, nil
}

func (p *yamlParser) mapping(indent int) (map[string]any, error) {
	m := map[string]any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && !isSeqItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: expected \"key: value\", got %q", l.num, l.text)
		}
		p.i++
		var v any
		var err error
		if rest == "" {
			// A block below, more indented, or a sequence at the key's own
			// indentation (kubectl writes "contexts:\n- context: ...").
			if p.i < len(p.lines) && (p.lines[p.i].indent > indent ||
				p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text)) {
				v, err = p.node(p.lines[p.i].indent)
			}
		} else {
			v, err = scalar(rest, l.num)
		}
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, nil
}

// child parses the block below an item whose value was on no line of its own.
func (p *yamlParser) child(indent int) (any, error) {
	if p.i < len(p.lines) && p.lines[p.i].indent > indent {
		return p.node(p.lines[p.i].indent)
	}
	return nil, nil
}

// splitKey splits "key: value" (key plain or quoted); value may be empty.
func splitKey(text string) (key, rest string, ok bool) {
	if strings.HasPrefix(text, "\"") || strings.HasPrefix(text, "'") {
		end := closingQuote(text)
		if end < 0 {
			return "", "", false
		}
		after := text[end+1:]
		if after != ":" && !strings.HasPrefix(after, ": ") {
			return "", "", false
		}
		k, err := scalar(text[:end+1], 0)
		if err != nil {
			return "", "", false
		}
		return k.(string), strings.TrimSpace(after[1:]), true
	}
	if strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[") {
		return "", "", false
	}
	if i := strings.Index(text, ": "); i > 0 {
		return text[:i], strings.TrimSpace(text[i+2:]), true
	}
	if strings.HasSuffix(text, ":") && len(text) > 1 {
		return text[:len(text)-1], "", true
	}
	return "", "", false
}

// closingQuote returns the index of the quote closing the one at text[0].
func closingQuote(text string) int {
	q := text[0]
	for i := 1; i < len(text); i++ {
		switch {
		case q == '"' && text[i] == '\\':
			i++
		case text[i] == q:
			if q == '\'' && i+1 < len(text) && text[i+1] == '\'' {
				i++ // '' is an escaped quote
				continue
			}
			return i
		}
	}
	return -1
}

func scalar(s string, line int) (any, error) {
	switch {
	case s == "|" || s == ">" || strings.HasPrefix(s, "|") || strings.HasPrefix(s, ">"):
		return nil, fmt.Errorf("line %d: block scalars (| and >) are not supported: write the value on one line", line)
	case strings.HasPrefix(s, "&") || strings.HasPrefix(s, "*") || strings.HasPrefix(s, "!"):
		return nil, fmt.Errorf("line %d: anchors, aliases and tags are not supported", line)
	case strings.HasPrefix(s, "\""):
		if end := closingQuote(s); end != len(s)-1 {
			return nil, fmt.Errorf("line %d: unterminated or trailing text after %s", line, s)
		}
		v, err := strconv.Unquote(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", line, s, err)
		}
		return v, nil
	case strings.HasPrefix(s, "'"):
		if end := closingQuote(s); end != len(s)-1 {
			return nil, fmt.Errorf("line %d: unterminated or trailing text after %s", line, s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "["):
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return s, nil // a non-JSON flow collection: kept as text (kubeconfig fields doctor reads are never such)
		}
		return v, nil
	case s == "~" || s == "null":
		return nil, nil
	}
	return s, nil
}

// stripComment removes a comment: "#" at the start or after a blank,
// outside quotes.
func stripComment(line string) string {
	var q byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case q != 0:
			if c == '\\' && q == '"' {
				i++
			} else if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			if i == 0 || strings.ContainsRune(" \t:-[{,", rune(line[i-1])) {
				q = c
			}
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}
