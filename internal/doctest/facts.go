package doctest

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Facts the documentation lists and the code defines, read from the Go
// source (go/parser) so that a list in the docs can be compared with them:
// the metric names (registrar/metrics.go), the /readyz stages (the strings of
// registrar.Stage) and the tests of the e2e suite (kind/e2e, build tag e2e).

// metricName is a series name as the docs write it: csi_registrar_ and at
// least one more word (`csi_registrar_*` names the prefix, not a series).
var metricName = regexp.MustCompile(`\bcsi_registrar_[a-z](?:[a-z0-9_]*[a-z0-9])?\b`)

// MetricNames returns the csi_registrar_* names the Go file at path defines
// as string constants, sorted.
func MetricNames(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, v := range s.(*ast.ValueSpec).Values {
				if s, ok := stringLit(v); ok && metricName.MatchString(s) && metricName.FindString(s) == s {
					names = append(names, s)
				}
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no string constant named csi_registrar_*", path)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// MetricRefs returns the csi_registrar_* names the text mentions, in order of
// first mention.
func MetricRefs(text string) []string {
	var refs []string
	for _, m := range metricName.FindAllString(text, -1) {
		if !slices.Contains(refs, m) {
			refs = append(refs, m)
		}
	}
	return refs
}

// StageNames returns the strings the String method of the type named typ in
// the Go file at path returns from its switch's cases (the default, after
// the switch, is not a stage), sorted.
func StageNames(path, typ string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "String" || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		if id, ok := fn.Recv.List[0].Type.(*ast.Ident); !ok || id.Name != typ {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, st := range cc.Body {
				if r, ok := st.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
					if s, ok := stringLit(r.Results[0]); ok {
						names = append(names, s)
					}
				}
			}
			return false
		})
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no (%s) String method returning strings from a switch's cases", path, typ)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// stageSpan is what a stage looks like in a code span: lower-case words
// before a ":" or "," ("waiting for kubelet: <what is awaited>", "registered,
// but …"). Spans of another form (`Probe`, `--kubelet-wait`, `fix=`) are not
// stages.
var stageSpan = regexp.MustCompile(`^([a-z]+(?: [a-z]+)*)(?:[:,].*)?$`)

// StageRefs returns the stages a list in the documentation names: the code
// spans of the text (in prose a span may go on over a line break), or in a
// table row the spans of its first cell only, of the form of a stage; in
// order of first mention.
func StageRefs(text string) []string {
	var refs []string
	var parts, prose []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "|") {
			parts = append(parts, strings.Join(prose, " "), tableCells(line)[0])
			prose = nil
		} else {
			prose = append(prose, strings.TrimSpace(line))
		}
	}
	for _, part := range append(parts, strings.Join(prose, " ")) {
		for _, m := range spanText.FindAllStringSubmatch(part, -1) {
			if s := stageSpan.FindStringSubmatch(m[1]); s != nil && !slices.Contains(refs, s[1]) {
				refs = append(refs, s[1])
			}
		}
	}
	return refs
}

// testName is a top-level test function's name.
var testName = regexp.MustCompile(`^Test[A-Z0-9_]\w*$`)

// TestNames returns the names of the test functions (func TestX(t
// *testing.T), not TestMain) of the _test.go files in dir that build with
// the given build tag set and no other, sorted.
func TestNames(dir, tag string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range files {
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if ok, err := buildsWith(f, tag); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		} else if !ok {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && testName.MatchString(fn.Name.Name) && fn.Name.Name != "TestMain" {
				names = append(names, fn.Name.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no test function in a _test.go file built with tag %q", dir, tag)
	}
	slices.Sort(names)
	return names, nil
}

// buildsWith reports whether the file's //go:build line (if any, before the
// package clause) holds with tag set and every other tag unset.
func buildsWith(f *ast.File, tag string) (bool, error) {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return false, err
			}
			return expr.Eval(func(t string) bool { return t == tag }), nil
		}
	}
	return true, nil
}

// TestRefs returns the test names (`TestX` code spans) of the text, in order
// of first mention.
func TestRefs(text string) []string {
	var refs []string
	for _, m := range spanText.FindAllStringSubmatch(text, -1) {
		if testName.MatchString(m[1]) && !slices.Contains(refs, m[1]) {
			refs = append(refs, m[1])
		}
	}
	return refs
}

// Section returns the text of the file at path between the markers
// <!-- name --> and <!-- /name -->, and the line the section starts on.
func Section(path, name string) (string, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	open, end := "<!-- "+name+" -->", "<!-- /"+name+" -->"
	text := string(b)
	i := strings.Index(text, open)
	if i < 0 {
		return "", 0, fmt.Errorf("%s: no %s marker; the list it marks is checked against the code: put %s before it and %s after it", path, open, open, end)
	}
	j := strings.Index(text[i:], end)
	if j < 0 {
		return "", 0, fmt.Errorf("%s: %s without %s: close the list it marks", path, open, end)
	}
	return text[i+len(open) : i+j], strings.Count(text[:i], "\n") + 1, nil
}

// CompareList returns nil when the documentation's list (doc) names exactly
// the code's facts (code), else an error naming each extra and each missing
// one, where the list is (where) and what the code is (source).
func CompareList(where, what string, doc, code []string, source string) error {
	var extra, missing []string
	for _, d := range doc {
		if !slices.Contains(code, d) {
			extra = append(extra, strconv.Quote(d))
		}
	}
	for _, c := range code {
		if !slices.Contains(doc, c) {
			missing = append(missing, strconv.Quote(c))
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return nil
	}
	var parts []string
	if len(extra) > 0 {
		parts = append(parts, "names "+strings.Join(extra, ", ")+", not in "+source)
	}
	if len(missing) > 0 {
		parts = append(parts, "misses "+strings.Join(missing, ", ")+" of "+source)
	}
	return fmt.Errorf("%s: the list of %s %s; the list must name exactly the %s of %s: correct it to %s",
		where, what, strings.Join(parts, " and "), what, source, strings.Join(code, ", "))
}

// CheckMetricRefs returns an error naming each csi_registrar_* name the text
// mentions that is not one of the code's, or nil.
func CheckMetricRefs(where, text string, code []string, source string) error {
	return checkRefs(where, "metric", MetricRefs(text), code, source)
}

// CheckCaseRefs returns an error naming each case name the text names
// (CaseRefs) that is not one of the code's, or nil. A former name the text
// declares ("`6_uninstalled` is now `7_uninstalled`", CaseRenames) counts as
// its current name, which must be one of the code's.
func CheckCaseRefs(where, text string, code []string, source string) error {
	renames := CaseRenames(text)
	refs := CaseRefs(text)
	var named []string
	for _, r := range refs {
		if now, ok := renames[r]; ok {
			r = now
		}
		if !slices.Contains(named, r) {
			named = append(named, r)
		}
	}
	return checkRefs(where, "case", named, code, source)
}

func checkRefs(where, what string, refs, code []string, source string) error {
	var unknown []string
	for _, r := range refs {
		// A readiness case by number ("R5") is the prefix of its name ("R5_newer_driver_fails").
		byNumber := len(r) == 2 && r[0] == 'R' && slices.ContainsFunc(code, func(c string) bool { return strings.HasPrefix(c, r+"_") })
		if !byNumber && !slices.Contains(code, r) {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s: no such %s in %s (it has %s): name one of those, or add the %s",
		where, strings.Join(unknown, ", "), what, source, strings.Join(code, ", "), what)
}

// stringLit returns the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

// caseName is the name of a numbered case: a case of verify
// (internal/drivercases) or a subtest of the e2e suite ("4_registration_socket_removed"),
// or a readiness case of verify ("R5_newer_driver_fails").
var caseName = regexp.MustCompile(`^(?:[1-9]|R[1-9])_[a-z]+(?:_[a-z]+)*$`)

// blockCase is a case name in a code block's text (an output, a command):
// not part of a longer word.
var blockCase = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])((?:[1-9]|R[1-9])_[a-z]+(?:_[a-z]+)*)\b`)

// readinessRef is a readiness case by its number, "R5", or a range of them, "R1-R5".
var readinessRef = regexp.MustCompile(`\bR([1-9])(?:[-–]R([1-9]))?\b`)

// CaseNames returns the string literals of the form of a case name in the Go
// files (tests included) of the directories, sorted.
func CaseNames(dirs ...string) ([]string, error) {
	var names []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, p := range files {
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
			if err != nil {
				return nil, err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if e, ok := n.(ast.Expr); ok {
					if s, ok := stringLit(e); ok && caseName.MatchString(s) {
						names = append(names, s)
					}
				}
				return true
			})
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no string of the form of a case name (1_deployed)", strings.Join(dirs, ", "))
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// CaseRefs returns the case names the text names as code spans, the case
// names in its code blocks (outputs and commands: a word of the form of a
// case name), and the readiness cases it names by number ("R5", "R1-R5":
// "R5" for each number, to be found as the prefix of a case), in order of
// first mention. Lines are read one by one (a case name has no space, so
// its span is on one line; and a fence's backticks do not pair with a
// span's).
func CaseRefs(text string) []string {
	var refs []string
	add := func(r string) {
		if !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		if _, ok := parseFence(line); ok {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			for _, m := range blockCase.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
		} else {
			for _, m := range spanText.FindAllStringSubmatch(line, -1) {
				if caseName.MatchString(m[1]) {
					add(m[1])
				}
			}
		}
		for _, m := range readinessRef.FindAllStringSubmatch(line, -1) {
			from, to := m[1][0], m[1][0]
			if m[2] != "" {
				to = m[2][0]
			}
			for n := from; n <= to; n++ {
				add("R" + string(n))
			}
		}
	}
	return refs
}

// caseRenamed is a case's former name the text declares: "`6_uninstalled` is now `7_uninstalled`",
// so that an output recorded before the rename can stay as recorded.
var caseRenamed = regexp.MustCompile("`((?:[1-9]|R[1-9])_[a-z_]+)` is now `((?:[1-9]|R[1-9])_[a-z_]+)`")

// CaseRenames returns the former names the text declares, each with its
// current name.
func CaseRenames(text string) map[string]string {
	renames := map[string]string{}
	for _, m := range caseRenamed.FindAllStringSubmatch(text, -1) {
		renames[m[1]] = m[2]
	}
	return renames
}
