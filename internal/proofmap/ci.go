package proofmap

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

// Step is one `run "NAME" make ...` step of .ci/run.
type Step struct {
	Name   string
	Target string            // the make target it runs
	Vars   map[string]string // the VAR=value words of its make command
	Slice  int               // the slice of the long form it belongs to; 0: the gate
	Line   int
}

// Slice is one `slice N "TITLE" PATHS...` of .ci/run: the steps after it,
// up to the next slice, are a part of the long form that .ci/run runs in
// turn, one a run (make ci-full runs them all).
type Slice struct {
	N     int
	Title string
	Paths []string // what the slice proves: changes under them make its last green run stale
	Line  int
}

var (
	runLine   = regexp.MustCompile(`^run "([^"]+)" (.*)$`)
	sliceLine = regexp.MustCompile(`^slice ([0-9]+) (.*)$`)
)

// ReadSteps reads the steps of a .ci/run script: its `run "NAME" make
// [--flags] TARGET [VAR=value...]` lines, continuation lines joined.
func ReadSteps(file string) ([]Step, error) {
	steps, _, err := ReadCI(file)
	return steps, err
}

// ReadCI reads the steps and the slices of a .ci/run script.
func ReadCI(file string) ([]Step, []Slice, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var steps []Step
	var parts []Slice
	current := 0
	for _, l := range logicalLines(string(b)) {
		if m := sliceLine.FindStringSubmatch(l.text); m != nil {
			words, err := shellWords(m[2])
			if err != nil || len(words) < 2 {
				return nil, nil, fmt.Errorf("%s:%d: %q: want `slice N \"TITLE\" PATHS...`", file, l.line, l.text)
			}
			n, _ := strconv.Atoi(m[1])
			if n != len(parts)+1 {
				return nil, nil, fmt.Errorf("%s:%d: slice %d after slice %d: number the slices 1, 2, ... in order", file, l.line, n, len(parts))
			}
			parts = append(parts, Slice{N: n, Title: words[0], Paths: words[1:], Line: l.line})
			current = n
			continue
		}
		m := runLine.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		words, err := shellWords(m[2])
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: step %q: %v", file, l.line, m[1], err)
		}
		s := Step{Name: m[1], Vars: map[string]string{}, Slice: current, Line: l.line}
		if len(words) == 0 || words[0] != "make" {
			return nil, nil, fmt.Errorf("%s:%d: step %q runs %q: want `make TARGET [VAR=value...]` (the proof map's test reads only make steps)", file, l.line, m[1], m[2])
		}
		for _, w := range words[1:] {
			switch {
			case strings.HasPrefix(w, "-"):
			case strings.Contains(w, "="):
				k, v, _ := strings.Cut(w, "=")
				s.Vars[k] = v
			case s.Target == "":
				s.Target = w
			default:
				return nil, nil, fmt.Errorf("%s:%d: step %q runs more than one target (%s, %s): one target a step", file, l.line, m[1], s.Target, w)
			}
		}
		if s.Target == "" {
			return nil, nil, fmt.Errorf("%s:%d: step %q names no make target", file, l.line, m[1])
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		return nil, nil, fmt.Errorf("%s: no `run \"NAME\" make ...` step", file)
	}
	for _, sl := range parts {
		if !slices.ContainsFunc(steps, func(s Step) bool { return s.Slice == sl.N }) {
			return nil, nil, fmt.Errorf("%s:%d: slice %d has no step", file, sl.Line, sl.N)
		}
	}
	return steps, parts, nil
}

type logicalLine struct {
	text string
	line int
}

// logicalLines joins lines ending in a backslash with the next one.
func logicalLines(text string) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(text, "\n") {
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\"))
			continue
		}
		cur.WriteString(l)
		out = append(out, logicalLine{strings.TrimSpace(cur.String()), start})
		cur.Reset()
	}
	return out
}

// shellWords splits a command line as bash would split its words: quotes
// removed, a backslash escaping the next character (in double quotes only
// before $, `, ", \). No expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// unmake turns make's $$ into $ (as often as it was doubled for sub-makes).
func unmake(s string) string {
	for strings.Contains(s, "$$") {
		s = strings.ReplaceAll(s, "$$", "$")
	}
	return s
}

// Tree is a checkout: the root of the repository.
type Tree struct {
	Root string
	mk   map[string][]string // target -> its recipe's logical lines
}

// recipe returns the recipe of a target (the rule naming it alone before
// the colon) in the Makefile and kind/**.mk.
func (t *Tree) recipe(target string) ([]string, error) {
	if t.mk == nil {
		t.mk = map[string][]string{}
		files := []string{filepath.Join(t.Root, "Makefile")}
		for _, g := range []string{"kind/*.mk", "kind/*/*.mk"} {
			m, _ := filepath.Glob(filepath.Join(t.Root, g))
			files = append(files, m...)
		}
		rule := regexp.MustCompile(`^([a-z0-9-]+)\s*:([^=]|$)`)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			cur := ""
			for _, l := range logicalLines(string(b)) {
				raw := l.text
				if m := rule.FindStringSubmatch(raw); m != nil {
					cur = m[1]
					continue
				}
				if cur != "" && strings.HasPrefix(linesAt(string(b), l.line), "\t") {
					t.mk[cur] = append(t.mk[cur], raw)
					continue
				}
				if raw != "" && !strings.HasPrefix(raw, "#") {
					cur = ""
				}
			}
		}
	}
	return t.mk[target], nil
}

func linesAt(text string, line int) string {
	ls := strings.Split(text, "\n")
	if line-1 < len(ls) {
		return ls[line-1]
	}
	return ""
}

// Runner is what a make target finally runs.
type Runner struct {
	Kind Kind // E2E, PluginManager, Case; "" when it runs no mapped test or case
	// Args are the words that select: E2E_ARGS for E2E, PM_RUN (as
	// -test.run) for PluginManager, VERIFY_ARGS and the --case words of the
	// scripts for Case.
	Args []string
}

var subMake = regexp.MustCompile(`\$\(MAKE\)((?:\s+-[-a-z]+)*)\s+([a-z0-9-]+)(.*)$`)
var scriptRef = regexp.MustCompile(`kind/(?:[a-z0-9-]+/)*[a-z0-9-]+\.sh`)

// Resolve follows a step's target through its recipe (the first $(MAKE)
// TARGET VAR=... of another target, or a kind/**/*.sh script that runs make
// e2e-driver, whose --case words it takes) to the runner of tests or cases
// and the words that select them.
func (t *Tree) Resolve(target string, vars map[string]string) (Runner, error) {
	return t.resolve(target, vars, 0)
}

func (t *Tree) resolve(target string, vars map[string]string, depth int) (Runner, error) {
	if depth > 5 {
		return Runner{}, fmt.Errorf("make %s: recipes call make more than 5 deep", target)
	}
	split := func(v string) ([]string, error) { return shellWords(unmake(v)) }
	switch target {
	case "e2e", "e2e-kind":
		a, err := split(vars["E2E_ARGS"])
		return Runner{Kind: E2E, Args: a}, err
	case "test-pluginmanager":
		r := Runner{Kind: PluginManager}
		if v := unmake(vars["PM_RUN"]); v != "" {
			r.Args = []string{"-test.run=" + v}
		}
		return r, nil
	case "e2e-driver":
		a, err := split(vars["VERIFY_ARGS"])
		return Runner{Kind: Case, Args: a}, err
	}
	rec, err := t.recipe(target)
	if err != nil {
		return Runner{}, err
	}
	for _, l := range rec {
		if m := subMake.FindStringSubmatch(l); m != nil {
			words, err := shellWords(m[3])
			if err != nil {
				return Runner{}, fmt.Errorf("make %s: %v", target, err)
			}
			sub := map[string]string{}
			for k, v := range vars {
				sub[k] = v
			}
			for _, w := range words {
				if k, v, ok := strings.Cut(w, "="); ok && !strings.HasPrefix(w, "-") {
					// The step's own VERIFY_ARGS ride along as $(VERIFY_ARGS).
					sub[k] = strings.ReplaceAll(v, "$("+k+")", vars[k])
				}
			}
			return t.resolve(m[2], sub, depth+1)
		}
		for _, s := range scriptRef.FindAllString(l, -1) {
			b, err := os.ReadFile(filepath.Join(t.Root, s))
			if err != nil {
				return Runner{}, err
			}
			if !strings.Contains(string(b), "e2e-driver") || !strings.Contains(string(b), "VERIFY_ARGS") || s == "kind/driver/verify.sh" {
				continue
			}
			r := Runner{Kind: Case}
			for _, m := range regexp.MustCompile(`--case ([A-Za-z0-9_]+)`).FindAllStringSubmatch(string(b), -1) {
				r.Args = append(r.Args, "--case", m[1])
			}
			extra, err := split(vars["VERIFY_ARGS"])
			r.Args = append(r.Args, extra...)
			return r, err
		}
	}
	return Runner{}, nil
}

// Selects returns the names a runner selects among the tests or cases that
// exist: for tests, -test.run and -test.skip (their first /-separated
// element, the top-level test's) evaluated as Go does; for verify, 1_deployed
// and 7_uninstalled, and the --case ones or, with none, cases 2-6 and R1-R5
// (which run unchosen on manifests with the rolling-update mode, as
// manifests/ has).
func (r Runner) Selects(names []string) ([]string, error) {
	if r.Kind == Case {
		var chosen []string
		for i := 0; i < len(r.Args); i++ {
			a := r.Args[i]
			switch {
			case a == "--case" && i+1 < len(r.Args):
				chosen = append(chosen, r.Args[i+1])
				i++
			case strings.HasPrefix(a, "--case="):
				chosen = append(chosen, strings.TrimPrefix(a, "--case="))
			}
		}
		if err := drivercases.CheckCases(chosen); err != nil {
			return nil, err
		}
		if len(chosen) == 0 {
			chosen = []string{drivercases.CasePodDeleted, drivercases.CaseKubeletRestart, drivercases.CaseSocketRemoved,
				drivercases.CaseDriverKilled, drivercases.CaseRollout}
			chosen = append(chosen, drivercases.ReadinessCases()...)
		}
		out := append([]string{drivercases.CaseDeployed, drivercases.CaseUninstalled}, chosen...)
		out = slices.Compact(slices.Sorted(slices.Values(out)))
		return out, nil
	}
	var run, skip *regexp.Regexp
	for _, a := range r.Args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		for _, f := range []struct {
			flag string
			re   **regexp.Regexp
		}{{"test.run=", &run}, {"run=", &run}, {"test.skip=", &skip}, {"skip=", &skip}} {
			if v, ok := strings.CutPrefix(a, f.flag); ok {
				re, err := regexp.Compile(topLevel(v))
				if err != nil {
					return nil, fmt.Errorf("%s: %v", a, err)
				}
				*f.re = re
			}
		}
	}
	var out []string
	for _, n := range names {
		if (run == nil || run.MatchString(n)) && (skip == nil || !skip.MatchString(n)) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// topLevel returns the first element of a -test.run pattern: up to the
// first / outside parentheses and brackets, as go test splits it.
func topLevel(pattern string) string {
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '/':
			if depth == 0 {
				return pattern[:i]
			}
		}
	}
	return pattern
}
