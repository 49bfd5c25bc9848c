package doctest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// The code the documentation's lists are compared with, relative to the root.
const (
	metricsSource = "registrar/metrics.go"
	stagesSource  = "registrar/status.go"
	e2eDir        = "kind/e2e"
	e2eTag        = "e2e"
	casesDir      = "internal/drivercases"
)

// stageLists are the files with a complete list of the /readyz stages,
// between <!-- readyz-stages --> markers.
var stageLists = []string{"docs/operating.md", "docs/troubleshooting.md"}

// A docList is a list the documentation keeps between <!-- id --> markers:
// refs reads its names, what says what they are.
type docList struct {
	id, what string
	refs     func(text string) []string
}

// The lists of the /readyz stages and of the e2e suite's tests.
var (
	stageList = docList{"readyz-stages", "/readyz stages", doctest.StageRefs}
	testList  = docList{"e2e-tests", "e2e tests", doctest.TestRefs}
)

// compare logs the names of l in the file at path, called file, and
// returns CompareList's verdict on them against code, which source holds.
func (l docList) compare(t *testing.T, path, file string, code []string, source string) error {
	t.Helper()
	text, line, err := doctest.Section(path, l.id)
	if err != nil {
		t.Fatal(err)
	}
	doc := l.refs(text)
	t.Logf("%s:%d: %s", file, line, strings.Join(doc, ", "))
	return doctest.CompareList(file, l.what, doc, code, source)
}

// checkMarkdownRefs checks, with check, the names each Markdown file of the
// tree uses (refs reads them) against code, which source holds; it returns
// how many names it read.
func checkMarkdownRefs(t *testing.T, refs func(text string) []string, check func(where, text string, code []string, source string) error,
	code []string, source string) int {
	t.Helper()
	n := 0
	for _, file := range markdownFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		n += len(refs(string(b)))
		if err := check(file, string(b), code, source); err != nil {
			t.Error(err)
		}
	}
	return n
}

// TestDocsMetrics: every csi_registrar_* name in a Markdown file of the tree
// is a metric registrar/metrics.go defines, and docs/operating.md (the
// reference of the metrics) names every one of them.
func TestDocsMetrics(t *testing.T) {
	code, err := doctest.MetricNames(filepath.Join(root, metricsSource))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s defines %s", metricsSource, strings.Join(code, ", "))
	n := checkMarkdownRefs(t, doctest.MetricRefs, doctest.CheckMetricRefs, code, metricsSource)
	t.Logf("%d metric names in Markdown files checked", n)
	b, err := os.ReadFile(filepath.Join(root, "docs/operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := doctest.MetricRefs(string(b))
	for _, c := range code {
		if !slices.Contains(refs, c) {
			t.Errorf("docs/operating.md does not name %s, a metric of %s: add it to \"Metrics and alerts\"", c, metricsSource)
		}
	}
}

// TestDocsReadyzStages: each list of the /readyz stages names exactly the
// strings of registrar.Stage.
func TestDocsReadyzStages(t *testing.T) {
	code, err := doctest.StageNames(filepath.Join(root, stagesSource), "Stage")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range stageLists {
		if err := stageList.compare(t, filepath.Join(root, file), file, code, "registrar.Stage's strings ("+stagesSource+")"); err != nil {
			t.Error(err)
		}
	}
}

// TestDocsE2ETests: docs/development.md's list of the e2e suite's tests names
// exactly the test functions of kind/e2e built with the e2e tag.
func TestDocsE2ETests(t *testing.T) {
	code, err := doctest.TestNames(filepath.Join(root, e2eDir), e2eTag)
	if err != nil {
		t.Fatal(err)
	}
	const file = "docs/development.md"
	if err := testList.compare(t, filepath.Join(root, file), file, code, "the func Test* of "+e2eDir+" (build tag "+e2eTag+")"); err != nil {
		t.Error(err)
	}
}

// TestDocsCaseNames: every case a Markdown file of the tree names (a code
// span, `6_rollout`; a word of a code block's output or command; a readiness
// case by number, R5, or range, R1-R5) is a case of verify
// (internal/drivercases) or of the e2e suite (kind/e2e).
func TestDocsCaseNames(t *testing.T) {
	code, err := doctest.CaseNames(filepath.Join(root, casesDir), filepath.Join(root, e2eDir))
	if err != nil {
		t.Fatal(err)
	}
	n := checkMarkdownRefs(t, doctest.CaseRefs, doctest.CheckCaseRefs, code, casesDir+" and "+e2eDir)
	t.Logf("%d case names in Markdown files checked against %s", n, strings.Join(code, ", "))
}

// TestFactsCaught: each check fails on a wrong list, and passes on the right
// one, on sources and pages written here.
func TestFactsCaught(t *testing.T) {
	dir := write(t, map[string]string{
		"metrics.go": "package r\n\nconst (\n\tmetricA = \"csi_registrar_a_total\"\n\tmetricB = \"csi_registrar_b\"\n\tother = \"x\"\n)\n\nvar notConst = \"csi_registrar_c\"\n",
		"status.go": "package r\n\ntype Stage int\n\nfunc (s Stage) String() string {\n\tswitch s {\n\tcase 0:\n\t\treturn \"waiting for driver\"\n" +
			"\tcase 1:\n\t\treturn \"standing by\"\n\t}\n\treturn \"unknown\"\n}\n\ntype Other int\n\nfunc (o Other) String() string {\n\tswitch o {\n\tcase 0:\n\t\treturn \"not a stage\"\n\t}\n\treturn \"\"\n}\n",
		"e2e/a_test.go":     "//go:build e2e\n\npackage e2e\n\nimport \"testing\"\n\nfunc TestMain(m *testing.M) {}\nfunc TestOne(t *testing.T) {}\nfunc TestTwo(t *testing.T) {}\nfunc helper() {}\n",
		"e2e/bench_test.go": "//go:build bench && !e2e\n\npackage e2e\n\nimport \"testing\"\n\nfunc TestBenchX(t *testing.T) {}\n",
		"stages.md":         "<!-- readyz-stages -->\n\n| says | meaning |\n|---|---|\n| `waiting for driver: ...` | see `Probe` |\n| `standing by` | x |\n\n<!-- /readyz-stages -->\n",
		"stages-wrong.md":   "prose: <!-- readyz-stages -->`waiting for driver`, `waiting for kubelet: <what>`, `--kubelet-wait`<!-- /readyz-stages -->\n",
		"tests.md":          "(<!-- e2e-tests -->`TestOne`, `TestTwo`<!-- /e2e-tests -->)\n",
		"tests-wrong.md":    "(<!-- e2e-tests -->`TestOne`, `TestGone`<!-- /e2e-tests -->)\n",
		"open.md":           "<!-- e2e-tests -->`TestOne`\n",
		"cases/run.go":      "package c\n\nconst (\n\tCaseDeployed = \"1_deployed\"\n\tCaseRollout = \"6_rollout\"\n)\n\nvar other = \"not_a_case\"\n",
	})
	p := func(name string) string { return filepath.Join(dir, name) }

	// Names a page may use anywhere: the names its source gives, a page
	// that uses them right, and one with a name that does not exist.
	for _, tc := range []struct {
		what         string
		names        func() ([]string, error)
		want         []string
		check        func(where, text string, code []string, source string) error
		source       string
		right, wrong string
		unknown      string
	}{
		{"metrics", func() ([]string, error) { return doctest.MetricNames(p("metrics.go")) },
			[]string{"csi_registrar_a_total", "csi_registrar_b"}, doctest.CheckMetricRefs, "metrics.go",
			"`csi_registrar_a_total{x}` and csi_registrar_b; the prefix csi_registrar_*",
			"`csi_registrar_b` and `csi_registrar_gone_total`", "csi_registrar_gone_total: no such metric"},
		{"cases", func() ([]string, error) { return doctest.CaseNames(p("cases")) },
			[]string{"1_deployed", "6_rollout"}, doctest.CheckCaseRefs, "cases",
			"`1_deployed`, then `6_rollout`",
			"CI runs `6_rollout` and `6_rejection`", "6_rejection: no such case"},
	} {
		names, err := tc.names()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: names %q, want %q", tc.what, names, tc.want)
		}
		if err := tc.check("ok.md", tc.right, names, tc.source); err != nil {
			t.Errorf("%s: right names: %v", tc.what, err)
		}
		err = tc.check("wrong.md", tc.wrong, names, tc.source)
		if err == nil || !strings.Contains(err.Error(), tc.unknown) {
			t.Errorf("%s: a name that does not exist: %v, want %q", tc.what, err, tc.unknown)
		}
	}
	if refs, want := doctest.CaseRefs("CI runs `6_rollout` and `6_rejection`, not 7_plain"), []string{"6_rollout", "6_rejection"}; !slices.Equal(refs, want) {
		t.Errorf("CaseRefs = %q, want %q (code spans only)", refs, want)
	}

	// Each list: the names its source gives, a page that lists them right,
	// and one with a name too many and one missing.
	for _, tc := range []struct {
		list           docList
		names          func() ([]string, error)
		want           []string
		source         string
		right, wrong   string
		extra, missing string
	}{
		{stageList, func() ([]string, error) { return doctest.StageNames(p("status.go"), "Stage") },
			[]string{"standing by", "waiting for driver"}, "Stage",
			"stages.md", "stages-wrong.md", `names "waiting for kubelet", not in Stage`, `misses "standing by"`},
		// No TestMain, nothing of the bench tag.
		{testList, func() ([]string, error) { return doctest.TestNames(p("e2e"), "e2e") },
			[]string{"TestOne", "TestTwo"}, "e2e",
			"tests.md", "tests-wrong.md", `names "TestGone"`, `misses "TestTwo"`},
	} {
		names, err := tc.names()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: names %q, want %q", tc.list.what, names, tc.want)
		}
		if err := tc.list.compare(t, p(tc.right), tc.right, names, tc.source); err != nil {
			t.Errorf("%s: right list: %v", tc.list.what, err)
		}
		err = tc.list.compare(t, p(tc.wrong), tc.wrong, names, tc.source)
		if err == nil || !strings.Contains(err.Error(), tc.extra) || !strings.Contains(err.Error(), tc.missing) {
			t.Errorf("%s: a list with a name too many and one missing: %v, want both named (%s, %s)", tc.list.what, err, tc.extra, tc.missing)
		}
	}
	if _, _, err := doctest.Section(p("open.md"), "e2e-tests"); err == nil || !strings.Contains(err.Error(), "without <!-- /e2e-tests -->") {
		t.Errorf("an unclosed section: %v, want it named", err)
	}
	if _, _, err := doctest.Section(p("tests.md"), "readyz-stages"); err == nil || !strings.Contains(err.Error(), "no <!-- readyz-stages --> marker") {
		t.Errorf("a missing section: %v, want it named", err)
	}
}

// TestCaseNamesCaught: a case that does not exist fails wherever it is
// named: a code span, a text output, a shell block's command, a readiness
// case by number or in a range, and a declared rename to a case that does
// not exist; the right ones pass.
func TestCaseNamesCaught(t *testing.T) {
	code := []string{"1_deployed", "6_rollout", "7_uninstalled", "R1_mode_manifests", "R2_volumes_across_instances"}
	right := "Case `6_rollout`, then R1-R2 and R2.\n\n```text\n--- PASS: TestDriver/7_uninstalled (1.2s)\n| x 1_deployed | pass |\n```\n\n" +
		"```sh illustrative\nkubectl csi-registrar verify -f m/ --case R2_volumes_across_instances\n```\n\n" +
		"As recorded then: `6_uninstalled` is now `7_uninstalled`.\n\n```text\nx 6_uninstalled pass\n```\n"
	if err := doctest.CheckCaseRefs("right.md", right, code, "cases"); err != nil {
		t.Errorf("right page: %v", err)
	}
	if refs := doctest.CaseRefs("a word2_x_y, pod_1_x and 1_000 are no cases\n```text\nnode_1_deployed\n```\n"); len(refs) != 0 {
		t.Errorf("CaseRefs found %q in words that are no case names", refs)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"a code span", "Case `6_rollouts`.", "6_rollouts: no such case"},
		{"a text output", "```text\n--- PASS: TestDriver/6_uninstalled (1.2s)\n```\n", "6_uninstalled: no such case"},
		{"a shell block", "```sh illustrative\nkubectl csi-registrar verify --case R3_own_csi_socket\n```\n", "R3_own_csi_socket: no such case"},
		{"a readiness case by number", "R1 passes, R3 fails.", "R3: no such case"},
		{"a range of readiness cases", "the cases R1-R4 run", "R3, R4: no such case"},
		{"a rename to no case", "`6_uninstalled` is now `8_uninstalled`.\n```text\n6_uninstalled\n```\n", "8_uninstalled: no such case"},
	} {
		err := doctest.CheckCaseRefs("wrong.md", tc.text, code, "cases")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s: caught: %v", tc.name, err)
		}
	}
}
