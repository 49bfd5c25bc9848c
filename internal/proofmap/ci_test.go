package proofmap

import (
	"slices"
	"testing"
)

func TestSelects(t *testing.T) {
	names := []string{"TestE2E", "TestRollingUpdate", "TestRollingUpdateIntoAndOutOfMode", "TestStatus"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, names},
		{[]string{"-test.run=^(TestE2E|TestRollingUpdate)$"}, []string{"TestE2E", "TestRollingUpdate"}},
		{[]string{"-test.run=TestE2E/4_"}, []string{"TestE2E"}},
		// As go test: a / inside parentheses does not split the pattern.
		{[]string{"-test.run=^(TestE2E/4_|TestStatus)$"}, []string{"TestStatus"}},
		{[]string{"-test.skip=^TestRollingUpdate$", "-handover-rollouts=3"}, []string{"TestE2E", "TestRollingUpdateIntoAndOutOfMode", "TestStatus"}},
		{[]string{"-test.run=Rolling", "-test.skip=Mode"}, []string{"TestRollingUpdate"}},
	} {
		got, err := Runner{Kind: E2E, Args: c.args}.Selects(names)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q selects %q, want %q", c.args, got, c.want)
		}
	}
}

// The quoting of .ci/run (bash, then make's $$) and of a recipe's sub-make
// ($$$$ for two makes).
func TestStepWords(t *testing.T) {
	w, err := shellWords(`make e2e E2E_ARGS="-test.run='^(A|B)\$\$' -x=1"`)
	if err != nil {
		t.Fatal(err)
	}
	a, err := shellWords(unmake(w[2][len("E2E_ARGS="):]))
	if err != nil || !slices.Equal(a, []string{"-test.run=^(A|B)$", "-x=1"}) {
		t.Errorf("E2E_ARGS words %q (%v)", a, err)
	}
	w, err = shellWords(`e2e E2E_ARGS=\''-test.run=^(A|B)$$$$'\'`)
	if err != nil {
		t.Fatal(err)
	}
	a, err = shellWords(unmake(w[1][len("E2E_ARGS="):]))
	if err != nil || !slices.Equal(a, []string{"-test.run=^(A|B)$"}) {
		t.Errorf("recipe E2E_ARGS words %q (%v)", a, err)
	}
}
