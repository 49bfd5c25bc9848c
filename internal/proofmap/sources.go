package proofmap

import (
	"bufio"
	"fmt"
	"go/build/constraint"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
)

var testFunc = regexp.MustCompile(`^func (Test[A-Z0-9_]\w*)\(\w+ \*testing\.T\)`)

// TestNames returns the top-level test functions (func TestXxx(t *testing.T))
// of the _test.go files in dir whose //go:build line holds with tags (and
// linux, amd64) set, sorted. The source is read, not built.
func TestNames(dir string, tags ...string) ([]string, error) {
	set := map[string]bool{"linux": true, "amd64": true, "unix": true}
	for _, t := range tags {
		set[t] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		n, err := fileTests(f, func(tag string) bool { return set[tag] })
		if err != nil {
			return nil, err
		}
		names = append(names, n...)
	}
	sort.Strings(names)
	return names, nil
}

func fileTests(file string, ok func(string) bool) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	header := true
	for sc.Scan() {
		l := sc.Text()
		if header {
			switch {
			case constraint.IsGoBuild(l):
				expr, err := constraint.Parse(l)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", file, err)
				}
				if !expr.Eval(ok) {
					return nil, nil
				}
			case strings.HasPrefix(l, "package "):
				header = false
			}
			continue
		}
		if m := testFunc.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
		}
	}
	return names, sc.Err()
}

// VerifyCases returns every case verify runs: 1_deployed and 7_uninstalled
// (always) and those Options.Cases may choose (drivercases.Cases).
func VerifyCases() []string {
	return append([]string{drivercases.CaseDeployed, drivercases.CaseUninstalled}, drivercases.Cases()...)
}

var e2eTarget = regexp.MustCompile(`^(e2e[a-z0-9-]*)\s*:[^=].*## `)

// E2ETargets returns the e2e* targets that make help lists (a "## " help on
// the rule's line) in the Makefile and the .mk files under root, sorted.
// The builds they share (e2e-build, e2e-driver-args, ...) carry no help and
// are no proof of their own.
func E2ETargets(root string) ([]string, error) {
	files := []string{filepath.Join(root, "Makefile")}
	for _, g := range []string{"kind/*.mk", "kind/*/*.mk"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	var targets []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if m := e2eTarget.FindStringSubmatch(l); m != nil {
				targets = append(targets, m[1])
			}
		}
	}
	sort.Strings(targets)
	return targets, nil
}
