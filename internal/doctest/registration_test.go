package doctest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The kubelet's registration of a driver on a node is judged by one rule,
// csiplugin.Registration.Registered (registrar/csiplugin/registration.go).
// These tests fail when code reads the raw facts (the CSINode's drivers,
// the Node's node ID annotation) outside the readers that hand them to the
// rule, when code combines the facts into a judgement of its own, or when
// a site that decides "registered" no longer calls the rule.

// registrationFactReaders read the raw facts: each builds a
// csiplugin.Registration (or drivercases.Registration) from them, prints
// them, or writes them (the status scale test's fake nodes).
var registrationFactReaders = map[string]bool{
	"registrar/csiplugin/registration.go":         true, // the rule and the annotation's parser
	"internal/drivercases/cluster.go":             true, // Registration, RegistrationOf, AnnotationMap, CSINodeEntries
	"internal/drivercases/cluster_diagnostics.go": true, // prints the Node and CSINode of a failure
	"internal/doctor/api.go":                      true, // doctor's own JSON types, into csiplugin.Registration
	"internal/clusterstatus/analyze.go":           true, // status' facts, into csiplugin.Registration
	"kind/bench/statusscale/main.go":              true, // writes fake CSINodes
	"registrar/nodestatus/registration.go":        true, // the Node and CSINode watched, into csiplugin.Registration
}

// registrationRuleSites decide whether a driver is registered; each calls
// the rule (Registered, Problem or Absent of a Registration, or
// drivercases.MeasureGaps, which judges with it).
var registrationRuleSites = []string{
	"internal/doctor/api.go",               // doctor
	"internal/clusterstatus/analyze.go",    // status
	"internal/drivercases/cases.go",        // verify: case 1
	"internal/drivercases/expect.go",       // verify: what the kubelet wrote
	"internal/drivercases/rollout_gaps.go", // verify: unregistered time
	"internal/storagee2e/registered.go",    // storage-e2e
	"kind/e2e/harness.go",                  // the suite: rolled out and registered
	"kind/e2e/rollout_test.go",             // the suite: gaps in the rollouts
	"internal/verify/guard.go",             // verify: nothing registered before it installs
	"kind/e2e/driver_notfound_test.go",     // the suite
}

var (
	rawFacts = regexp.MustCompile(`\.Spec\.Drivers\b|NodeIDAnnotation\]|ParseNodeIDAnnotation\(`)
	// Both facts combined into a verdict without the rule.
	ownJudgement = regexp.MustCompile(`Annotated\s*(&&|\|\|)\s*!?len\(|len\([^)]*Entries\)[^\n]*(&&|\|\|)\s*!?\w+\.Annotated|AnnotationID\s*==|\.Annotation\s*==\s*\w+\.Entries`)
	callsRule    = regexp.MustCompile(`\.(Registered|Problem|Absent)\(\)|MeasureGaps\(`)
)

func goFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && (rel == "bin" || rel == "vendor" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRegistrationJudgedByOneRule(t *testing.T) {
	files := goFiles(t)
	for name, src := range files {
		if strings.HasPrefix(name, "registrar/csiplugin/") {
			continue
		}
		if !strings.HasSuffix(name, "_test.go") && rawFacts.MatchString(src) && !registrationFactReaders[name] {
			t.Errorf("%s reads the CSINode's drivers or the node ID annotation itself: read them with drivercases.RegistrationOf/ReadRegistration (or add it to registrationFactReaders if it hands them to csiplugin.Registration)", name)
		}
		for i, line := range strings.Split(src, "\n") {
			if ownJudgement.MatchString(line) && !callsRule.MatchString(line) {
				t.Errorf("%s:%d judges registration from the facts itself: %s; use Registration.Registered, Problem or Absent (csiplugin's rule)", name, i+1, strings.TrimSpace(line))
			}
		}
	}
	for _, name := range registrationRuleSites {
		src, ok := files[name]
		if !ok {
			t.Errorf("%s: no such file (update registrationRuleSites)", name)
			continue
		}
		if !callsRule.MatchString(src) {
			t.Errorf("%s decides whether a driver is registered but calls no rule (Registered, Problem, Absent, MeasureGaps)", name)
		}
	}
	for name := range registrationFactReaders {
		if _, ok := files[name]; !ok {
			t.Errorf("%s: no such file (update registrationFactReaders)", name)
		}
	}
}
