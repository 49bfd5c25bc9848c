package doctest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The make variables the documentation names ("`make e2e K8S=1.34`",
// "`STATUS_NODES=5000`, the default") against the Makefile, its included
// files and the scripts its recipes run.

// MakeVarClaim is a make variable the documentation names, with the default
// it states ("" when it states none).
type MakeVarClaim struct {
	File    string
	Line    int
	Var     string
	Default string
	// HasDefault: the text states a default ("`VAR=X`, the default", "`VAR` (default `X`)").
	HasDefault bool
}

func (c MakeVarClaim) String() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

var (
	makeVarName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	// "`VAR=X`, the default" and "`VAR` (default `X`)".
	makeVarDefault = []*regexp.Regexp{
		regexp.MustCompile("`([A-Z][A-Z0-9_]*)=([^`]*)`, the default"),
		regexp.MustCompile("`([A-Z][A-Z0-9_]*)` \\(default `([^`]*)`\\)"),
	}
)

// makeAssignments returns the VAR=value words of the make commands in a
// command line: after each word "make", up to the end of that command.
func makeAssignments(cmd string) []string {
	var vars []string
	words := strings.Fields(cmd)
	for i := 0; i < len(words); i++ {
		if words[i] != "make" {
			continue
		}
		for j := i + 1; j < len(words); j++ {
			w := words[j]
			if w == "&&" || w == "||" || w == "|" || w == ";" || strings.HasSuffix(w, ";") {
				break
			}
			name, _, ok := strings.Cut(w, "=")
			if ok && makeVarName.MatchString(name) {
				vars = append(vars, name)
			}
		}
	}
	return vars
}

// MakeVarClaims returns the make variables the Markdown file at path names:
// the VAR=value words of the make commands in its code spans and shell
// blocks, and the defaults it states in prose.
func MakeVarClaims(path string) ([]MakeVarClaim, error) {
	blocks, prose, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	var claims []MakeVarClaim
	eachCommand(blocks, prose, func(line int, cmd string) {
		for _, v := range makeAssignments(cmd) {
			claims = append(claims, MakeVarClaim{File: path, Line: line, Var: v})
		}
	})
	for i, line := range prose {
		for _, re := range makeVarDefault {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				claims = append(claims, MakeVarClaim{File: path, Line: i + 1, Var: m[1], Default: m[2], HasDefault: true})
			}
		}
	}
	return claims, nil
}

// MakeVars is what the build knows of its variables: every name its
// Makefiles and scripts mention, and the defaults they give.
type MakeVars struct {
	Known    map[string]bool
	Defaults map[string]string // from "VAR ?= X" in a Makefile, "${VAR:-X}" in a script
}

var (
	upperWord    = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*\b`)
	makeDefault  = regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*)\s*\?=[ \t]*(.*?)\s*$`)
	shellDefault = regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*):-([^}$]*)\}`)
)

// ReadMakeVars reads the variables of makefiles (their "VAR ?= X" lines)
// and scripts (their "${VAR:-X}"); a name either mentions is known.
func ReadMakeVars(makefiles, scripts []string) (MakeVars, error) {
	v := MakeVars{Known: map[string]bool{}, Defaults: map[string]string{}}
	read := func(p string, def *regexp.Regexp) error {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, w := range upperWord.FindAllString(string(b), -1) {
			v.Known[w] = true
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			if _, seen := v.Defaults[m[1]]; !seen {
				v.Defaults[m[1]] = m[2]
			}
		}
		return nil
	}
	for _, p := range makefiles {
		if err := read(p, makeDefault); err != nil {
			return v, err
		}
	}
	for _, p := range scripts {
		if err := read(p, shellDefault); err != nil {
			return v, err
		}
	}
	return v, nil
}

// Check returns what is wrong with the claim, or nil: the variable must be
// one the build mentions, and a stated default the one it gives.
func (c MakeVarClaim) Check(v MakeVars) error {
	if !v.Known[c.Var] {
		return fmt.Errorf("%s: make variable %s: no Makefile or script of the build mentions it, so make ignores it: correct the name", c, c.Var)
	}
	if !c.HasDefault {
		return nil
	}
	d, ok := v.Defaults[c.Var]
	switch {
	case !ok:
		return fmt.Errorf("%s: the documentation states %s's default as %q, but no \"%s ?= ...\" or \"${%s:-...}\" gives one: correct the documentation", c, c.Var, c.Default, c.Var, c.Var)
	case d != c.Default:
		return fmt.Errorf("%s: the documentation states %s's default as %q, the build's is %q: correct the documentation", c, c.Var, c.Default, d)
	}
	return nil
}
