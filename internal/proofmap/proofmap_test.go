package proofmap

import (
	"path/filepath"
	"strings"
	"testing"
)

const root = "../.."

// TestProofMap checks docs/development.md's proof map against the tree and
// .ci/run: every e2e test, in-process plugin-manager test, verify case and
// e2e* target is mapped, and each step selects exactly the proofs the map
// gives it.
func TestProofMap(t *testing.T) {
	errs, err := checkTree(root, filepath.Join(root, "docs/development.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

func checkTree(root, doc string) ([]string, error) {
	m, err := ReadMap(doc)
	if err != nil {
		return nil, err
	}
	steps, err := ReadSteps(filepath.Join(root, ".ci/run"))
	if err != nil {
		return nil, err
	}
	tr := &Tree{Root: root}
	exist, err := tr.Exist()
	if err != nil {
		return nil, err
	}
	sel, err := tr.Selected(steps, exist)
	if err != nil {
		return nil, err
	}
	m.File = strings.TrimPrefix(m.File, root+"/")
	return Check(m, steps, exist, sel), nil
}
