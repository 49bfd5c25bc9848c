package newdriver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// The generated project's manifests/base/ is csi-registrar's manifests/base
// with the declared edits of baseedits.go applied, at generation time: one
// source for the deployment. The edits work on the YAML nodes (comments and
// order kept) and each checks what it changes is there as declared: a
// change of manifests/base that an edit no longer fits fails the generation
// (and TestGenerateBase) with the edit's name, for the edit to be reviewed.

// baseDir is csi-registrar's manifests/base in the source module, and the
// generated project's.
const baseDir = "manifests/base"

// A baseEdit is one declared difference between csi-registrar's
// manifests/base and the generated project's.
type baseEdit struct {
	name string // short, unique: named in errors and in the files' headers
	why  string // the reason, reviewed with the edit
	file string // the base file it edits
	op   baseOp
}

// A baseOp changes one parsed file. Values it writes are templates with
// [[ ]] delimiters over templateData; it returns an error when what it
// changes is not in the file as declared.
type baseOp interface {
	apply(doc *yaml.Node, x expander) error
}

// expander renders an op's templated value.
type expander func(string) (string, error)

// baseFile is one file of the base as the project gets it: keep false
// drops it (an edit removed it).
type baseFile struct {
	name  string
	docs  []*yaml.Node
	keep  bool
	edits []string
}

// transformBase applies edits to the base files (name -> contents) and
// returns the project's files, each with a header naming its source and
// the edits applied. Every edit must apply: an error names the first that
// does not. No text of forbidden (text -> why) may be left in a value or a
// comment of the result, unless the project's own names hold it.
func transformBase(files map[string][]byte, edits []baseEdit, forbidden map[string]string, d templateData,
	header func(name string, edits []string) string) ([]file, error) {
	x := func(s string) (string, error) {
		t, err := template.New("edit").Delims("[[", "]]").Option("missingkey=error").Parse(s)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		if err := t.Execute(&b, d); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	forbid := map[string]string{}
	for text, why := range forbidden {
		if !strings.Contains(d.Driver+" "+d.Binary+" "+d.Module, text) {
			forbid[text] = why
		}
	}
	parsed := map[string]*baseFile{}
	var names []string
	for name, data := range files {
		docs, err := decodeAll(data)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", baseDir, name, err)
		}
		parsed[name] = &baseFile{name: name, docs: docs, keep: true}
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for _, e := range edits {
		if seen[e.file+" "+e.name] {
			return nil, fmt.Errorf("base edit %q of %s is declared twice", e.name, e.file)
		}
		seen[e.file+" "+e.name] = true
		f := parsed[e.file]
		if f == nil {
			return nil, fmt.Errorf("base edit %q (%s): %s/%s is not in the source: review the edit", e.name, e.why, baseDir, e.file)
		}
		if _, ok := e.op.(dropFile); ok {
			f.keep = false
			f.edits = append(f.edits, e.name)
			continue
		}
		if !f.keep {
			return nil, fmt.Errorf("base edit %q: %s is dropped by an earlier edit", e.name, e.file)
		}
		if len(f.docs) != 1 {
			return nil, fmt.Errorf("base edit %q: %s/%s holds %d documents; the edits work on files of one", e.name, baseDir, e.file, len(f.docs))
		}
		if err := e.op.apply(f.docs[0], x); err != nil {
			return nil, fmt.Errorf("base edit %q (%s) does not fit %s/%s: %w; review the edit against the file", e.name, e.why, baseDir, e.file, err)
		}
		f.edits = append(f.edits, e.name)
	}
	var out []file
	for _, name := range names {
		f := parsed[name]
		if !f.keep {
			continue
		}
		for _, doc := range f.docs {
			if err := checkForbidden(doc, forbid); err != nil {
				return nil, fmt.Errorf("the edits of %s/%s leave %w", baseDir, name, err)
			}
		}
		var b bytes.Buffer
		b.WriteString(header(name, f.edits))
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		for _, doc := range f.docs {
			if err := enc.Encode(doc); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
		out = append(out, file{path: baseDir + "/" + name, data: b.Bytes(), mode: 0o644})
	}
	return out, nil
}

// checkForbidden returns an error naming the first text of forbidden in a
// value or a comment under doc.
func checkForbidden(doc *yaml.Node, forbidden map[string]string) error {
	var err error
	walk(doc, func(n *yaml.Node) {
		for _, s := range []string{n.Value, n.HeadComment, n.LineComment, n.FootComment} {
			for text, why := range forbidden {
				if err == nil && strings.Contains(s, text) {
					err = fmt.Errorf("%q in %q (%s): an edit is missing", text, s, why)
				}
			}
		}
	})
	return err
}

func decodeAll(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &n)
	}
}

// A path selects a node: mapping keys; "k=v", the item of a sequence of
// mappings whose key k is v; "=v", the item of a sequence of scalars that
// is v.
type yamlPath []string

func (p yamlPath) String() string { return strings.Join(p, " > ") }

// lookup returns the node at p and, for a path of more than one step, its
// parent and the index of the node (a mapping's value: the index of its
// value in parent.Content).
func lookup(doc *yaml.Node, p yamlPath) (node, parent *yaml.Node, index int, err error) {
	n := doc
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	for i, step := range p {
		parent, index = n, -1
		switch {
		case n.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == step {
					index = j + 1
				}
			}
		case n.Kind == yaml.SequenceNode && strings.Contains(step, "="):
			k, v, _ := strings.Cut(step, "=")
			for j, item := range n.Content {
				if k == "" && item.Kind == yaml.ScalarNode && item.Value == v {
					index = j
				}
				if k != "" && item.Kind == yaml.MappingNode {
					if kv, _, _, err := lookup(item, yamlPath{k}); err == nil && kv.Value == v {
						index = j
					}
				}
			}
		}
		if index < 0 {
			return nil, nil, 0, fmt.Errorf("%s: no %q here", yamlPath(p[:i+1]), step)
		}
		n = parent.Content[index]
	}
	return n, parent, index, nil
}

// setScalar: the scalar at path is from; it becomes to (a template).
type setScalar struct {
	at       yamlPath
	from, to string
}

func (s setScalar) apply(doc *yaml.Node, x expander) error {
	n, _, _, err := lookup(doc, s.at)
	if err != nil {
		return err
	}
	if n.Kind != yaml.ScalarNode || n.Value != s.from {
		return fmt.Errorf("%s is %s, declared %q", s.at, show(n), s.from)
	}
	v, err := x(s.to)
	if err != nil {
		return err
	}
	n.Value = v
	return nil
}

// setFlow: the node at path, in flow style, is from; it becomes to (YAML
// in flow style, a template), its comments kept.
type setFlow struct {
	at       yamlPath
	from, to string
}

func (s setFlow) apply(doc *yaml.Node, x expander) error {
	n, _, _, err := lookup(doc, s.at)
	if err != nil {
		return err
	}
	if got := show(n); got != s.from {
		return fmt.Errorf("%s is %s, declared %s", s.at, got, s.from)
	}
	v, err := x(s.to)
	if err != nil {
		return err
	}
	var repl yaml.Node
	if err := yaml.Unmarshal([]byte(v), &repl); err != nil {
		return fmt.Errorf("the new value %s: %w", v, err)
	}
	r := repl.Content[0]
	r.HeadComment, r.LineComment, r.FootComment = n.HeadComment, n.LineComment, n.FootComment
	if r.Kind != yaml.ScalarNode {
		r.Style = n.Style // flow stays flow, block stays block
	}
	*n = *r
	return nil
}

// remove: the node at path (a mapping key's value, or a sequence item) is
// from (flow style); it goes, with its key.
type remove struct {
	at   yamlPath
	from string
}

func (r remove) apply(doc *yaml.Node, _ expander) error {
	n, parent, i, err := lookup(doc, r.at)
	if err != nil {
		return err
	}
	if got := show(n); got != r.from {
		return fmt.Errorf("%s is %s, declared %s", r.at, got, r.from)
	}
	if parent.Kind == yaml.MappingNode {
		parent.Content = slices.Delete(parent.Content, i-1, i+1)
	} else {
		parent.Content = slices.Delete(parent.Content, i, i+1)
	}
	return nil
}

// insert: into the sequence at path, value (YAML, a template) after the
// item after selects ("=v" or "k=v", a template; "" inserts first), with a
// head comment (a template; "" none).
type insert struct {
	at           yamlPath
	after, value string
	comment      string
}

func (s insert) apply(doc *yaml.Node, x expander) error {
	seq, _, _, err := lookup(doc, s.at)
	if err != nil {
		return err
	}
	if seq.Kind != yaml.SequenceNode {
		return fmt.Errorf("%s is %s, not a list", s.at, show(seq))
	}
	i := 0
	if s.after != "" {
		after, err := x(s.after)
		if err != nil {
			return err
		}
		_, _, j, err := lookup(doc, append(slices.Clone(s.at), after))
		if err != nil {
			return err
		}
		i = j + 1
	}
	v, err := x(s.value)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(v), &n); err != nil {
		return fmt.Errorf("the new item %s: %w", v, err)
	}
	item := n.Content[0]
	if item.Kind != yaml.ScalarNode {
		item.Style = 0 // block, as the items around it
	}
	if item.HeadComment, err = x(s.comment); err != nil {
		return err
	}
	seq.Content = slices.Insert(seq.Content, i, item)
	return nil
}

// replaceText: in every scalar value (and, with comments, every comment)
// of the file, from becomes to (a template); it must occur.
type replaceText struct {
	from, to string
	comments bool
}

func (r replaceText) apply(doc *yaml.Node, x expander) error {
	to, err := x(r.to)
	if err != nil {
		return err
	}
	n := 0
	walk(doc, func(node *yaml.Node) {
		if node.Kind == yaml.ScalarNode && strings.Contains(node.Value, r.from) {
			node.Value = strings.ReplaceAll(node.Value, r.from, to)
			n++
		}
		if r.comments {
			for _, c := range []*string{&node.HeadComment, &node.LineComment, &node.FootComment} {
				if strings.Contains(*c, r.from) {
					*c = strings.ReplaceAll(*c, r.from, to)
					n++
				}
			}
		}
	})
	if n == 0 {
		return fmt.Errorf("%q occurs nowhere", r.from)
	}
	return nil
}

// setLabel: every label (metadata.labels, a pod template's labels) key is
// from; it becomes to (a template). At least one must be there.
type setLabel struct {
	key, from, to string
}

func (s setLabel) apply(doc *yaml.Node, x expander) error {
	to, err := x(s.to)
	if err != nil {
		return err
	}
	n := 0
	var bad []string
	walk(doc, func(node *yaml.Node) {
		if node.Kind != yaml.MappingNode {
			return
		}
		for j := 0; j+1 < len(node.Content); j += 2 {
			if node.Content[j].Value != "labels" || node.Content[j+1].Kind != yaml.MappingNode {
				continue
			}
			labels := node.Content[j+1]
			for k := 0; k+1 < len(labels.Content); k += 2 {
				if labels.Content[k].Value != s.key {
					continue
				}
				if v := labels.Content[k+1]; v.Value == s.from {
					v.Value = to
					n++
				} else {
					bad = append(bad, v.Value)
				}
			}
		}
	})
	switch {
	case len(bad) > 0:
		return fmt.Errorf("label %s is %q, declared %q", s.key, bad, s.from)
	case n == 0:
		return fmt.Errorf("no label %s", s.key)
	}
	return nil
}

// setComment: the head comment of the node at path (of the file: the
// first key's, nil path) contains has; it becomes to (a template; each line
// "# "-prefixed, or "" for none).
type setComment struct {
	at       yamlPath
	has, to  string
	keyValue bool // the comment of a mapping key (true), not of the value
}

func (s setComment) apply(doc *yaml.Node, x expander) error {
	var n *yaml.Node
	switch {
	case len(s.at) == 0 && doc.HeadComment != "":
		n = doc // a comment with a blank line before the first key
	case len(s.at) == 0:
		if root := doc.Content[0]; len(root.Content) > 0 {
			n = root.Content[0] // the first key of the document's mapping
		} else {
			return errors.New("the document is empty")
		}
	default:
		node, parent, i, err := lookup(doc, s.at)
		if err != nil {
			return err
		}
		n = node
		if s.keyValue && parent.Kind == yaml.MappingNode {
			n = parent.Content[i-1]
		}
	}
	if !strings.Contains(n.HeadComment, s.has) {
		return fmt.Errorf("the comment of %s is %q, declared to contain %q", s.at, n.HeadComment, s.has)
	}
	to, err := x(s.to)
	if err != nil {
		return err
	}
	n.HeadComment = strings.TrimSuffix(to, "\n")
	return nil
}

// dropFile: the file is not in the project.
type dropFile struct{}

func (dropFile) apply(*yaml.Node, expander) error { return nil }

func walk(n *yaml.Node, f func(*yaml.Node)) {
	f(n)
	for _, c := range n.Content {
		walk(c, f)
	}
}

// show is a node in flow style, for declarations and errors: a scalar
// quoted as Go does (strconv.Quote), a sequence [a, b], a mapping {k: v}.
func show(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	case yaml.SequenceNode:
		var items []string
		for _, c := range n.Content {
			items = append(items, show(c))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case yaml.MappingNode:
		var items []string
		for j := 0; j+1 < len(n.Content); j += 2 {
			items = append(items, n.Content[j].Value+": "+show(n.Content[j+1]))
		}
		return "{" + strings.Join(items, ", ") + "}"
	case yaml.AliasNode, yaml.DocumentNode:
		return fmt.Sprintf("<%v node>", n.Kind)
	}
	return "<unknown node>"
}
