package doctest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
)

// root is the repository's root, seen from this package's directory.
const root = "../.."

// runFiles are the Markdown files whose ```sh test blocks TestDocsRun runs:
// README.md, CHANGELOG.md, everything under docs/, and the driver guide
// (whose block another test runs: ownRunner).
func runFiles(t *testing.T) []string {
	t.Helper()
	return append([]string{"README.md", "CHANGELOG.md", "stubdriver/GUIDE.md"}, docsPages(t)...)
}

// docsPages are the Markdown files under docs/.
func docsPages(t *testing.T) []string {
	t.Helper()
	var pages []string
	for _, f := range markdownFiles(t) {
		if strings.HasPrefix(f, "docs/") {
			pages = append(pages, f)
		}
	}
	return pages
}

// markdownFiles are all the Markdown files of the tree (their links are checked).
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(name, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// blocks returns the code blocks of a file named relative to the root, with
// File relative to the root too.
func blocks(t *testing.T, file string) []doctest.Block {
	t.Helper()
	bs, err := doctest.Blocks(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	for i := range bs {
		bs[i].File = file
	}
	return bs
}

// TestDocsTagged fails, in every Markdown file of the tree, on a code block
// without a language, on a shell block that does not say how it is checked
// (docs/README.md, "Tested documentation"), and on a ```sh ci block with a
// command CI does not run.
func TestDocsTagged(t *testing.T) {
	steps, err := doctest.CISteps(filepath.Join(root, ".ci/run"))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[doctest.Tag]int{}
	for _, file := range markdownFiles(t) {
		for _, b := range blocks(t, file) {
			if err := b.Check(); err != nil {
				t.Error(err)
			} else if b.Tag == doctest.CI {
				if err := b.CheckCI(steps); err != nil {
					t.Error(err)
				}
			}
			if b.Shell() {
				counts[b.Tag]++
			}
		}
	}
	t.Logf("shell blocks: %d test, %d ci, %d illustrative", counts[doctest.Test], counts[doctest.CI], counts[doctest.Illustrative])
}

// checkEachInMarkdown checks with check each item that read finds in a
// Markdown file of the tree (its errors name files relative to the root);
// it returns how many it checked.
func checkEachInMarkdown[T any](t *testing.T, read func(path string) ([]T, error), check func(root string, item T) error) int {
	t.Helper()
	n := 0
	for _, file := range markdownFiles(t) {
		items, err := read(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			n++
			if err := check(root, it); err != nil {
				t.Error(strings.ReplaceAll(err.Error(), root+"/", ""))
			}
		}
	}
	return n
}

// TestDocsLinks resolves every link of every Markdown file in the tree: files
// and directories must exist, anchors must be headings of the page; external
// links are checked for their form only (no network).
func TestDocsLinks(t *testing.T) {
	t.Logf("%d links checked", checkEachInMarkdown(t, doctest.Links, doctest.CheckLink))
}

// ownRunner names the files whose test blocks another test runs, with the
// environment they need: stubdriver/GUIDE.md's block renames a copy of the
// package in a new module (stubdriver's TestGuideRename).
var ownRunner = map[string]string{"stubdriver/GUIDE.md": "stubdriver.TestGuideRename"}

// TestDocsRun runs every ```sh test block of README.md and docs/ as a reader
// would, from the repository's root, with csi-registrar (built from this
// checkout) first on PATH and TMPDIR a fresh directory with a short path.
func TestDocsRun(t *testing.T) {
	var run []doctest.Block
	for _, file := range runFiles(t) {
		for _, b := range blocks(t, file) {
			if b.Tag == doctest.Test && b.Shell() {
				if by, ok := ownRunner[file]; ok {
					t.Logf("%s: run by %s", b, by)
					continue
				}
				run = append(run, b)
			}
		}
	}
	if len(run) == 0 {
		t.Skip("no ```sh test block in README.md or docs/")
	}
	if testing.Short() {
		t.Skipf("-short: %d documentation blocks not run (they build and run csi-registrar)", len(run))
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t, abs)
	for _, b := range run {
		t.Run(strings.ReplaceAll(b.String(), "/", "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// A short TMPDIR: sockets made under it must stay within 107 bytes.
			tmp, err := os.MkdirTemp("", "doctest")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(tmp) })
			// The registrars a block starts keep their state file there
			// too, not at the default /dev/shm path every block (and
			// every program on this machine) would share.
			env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TMPDIR="+tmp,
				"CSI_REGISTRAR_STATE_FILE="+filepath.Join(tmp, "csi-registrar.state"))
			start := time.Now()
			out, err := doctest.Run(ctx, b, abs, env)
			t.Logf("%s took %s:\n%s", b, time.Since(start).Round(time.Millisecond), out)
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// buildBinary builds cmd/csi-registrar into a temporary directory and returns
// it. With the race detector on (make test), the binary is built with it
// too, so that it reuses the packages the tests compiled.
func buildBinary(t *testing.T, abs string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", filepath.Join(dir, "csi-registrar")}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/csi-registrar")...)
	cmd.Dir = abs
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built csi-registrar for the documentation's blocks in %s", time.Since(start).Round(time.Millisecond))
	return dir
}

// The README is the five-minute introduction (issue 25): detail goes into
// docs/, one page per reader. Counted as wc -l -w counts.
const (
	readmeMaxLines = 200
	readmeMaxWords = 1500
)

func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines, words := strings.Count(string(b), "\n"), len(strings.Fields(string(b)))
	t.Logf("README.md: %d lines, %d words", lines, words)
	if lines > readmeMaxLines || words > readmeMaxWords {
		t.Errorf("README.md has %d lines and %d words; at most %d and %d: move the detail into the docs/ page for its reader (docs/README.md lists them) and link it",
			lines, words, readmeMaxLines, readmeMaxWords)
	}
}

// claimFiles are the files whose claims TestDocsClaims checks: the user's
// pages (README.md, CHANGELOG.md, docs/), the chart's README and the kind
// READMEs.
func claimFiles(t *testing.T) []string {
	return append([]string{"README.md", "CHANGELOG.md", "manifests/chart/README.md", "kind/e2e/README.md", "kind/localnode/README.md"}, docsPages(t)...)
}

// checkClaims reads the claims of the file f of the tree with each of reads
// and checks each with check; it returns how many it checked.
func checkClaims[C any](t *testing.T, f string, check func(C) error, reads ...func(path string) ([]C, error)) int {
	t.Helper()
	n := 0
	for _, read := range reads {
		claims, err := read(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claims {
			if err := check(c); err != nil {
				t.Error(err)
			}
		}
		n += len(claims)
	}
	return n
}

// readHelps puts in helps, by command, the flags of each of cmds as parse
// reads them from `bin CMD --help`; a command without flags fails t.
func readHelps(t *testing.T, helps map[string]map[string]doctest.FlagHelp, bin string, parse func(help string) map[string]doctest.FlagHelp, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		out, err := exec.Command(bin, cmd, "--help").Output()
		if err != nil {
			t.Fatalf("%s %s --help: %v", filepath.Base(bin), cmd, err)
		}
		if helps[cmd] = parse(string(out)); len(helps[cmd]) == 0 {
			t.Fatalf("%s %s --help: no flag found in\n%s", filepath.Base(bin), cmd, out)
		}
	}
}

// TestDocsClaims checks what the documentation (claimFiles) states about the
// code: every flag default it states (tables with a "default" column,
// "(default X)" and the other forms in prose) against the --help of the
// csi-registrar and the kubectl plugin built from this checkout, every flag
// it gives the kubectl plugin's commands against their --help, every `make
// TARGET` against the targets `make help` lists, and every make variable it
// names (and the default it states) against the Makefiles and scripts.
func TestDocsClaims(t *testing.T) {
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(buildBinary(t, abs), "csi-registrar")
	helps := map[string]map[string]doctest.FlagHelp{}
	readHelps(t, helps, bin, doctest.ParseHelp, "register", "driver", "doctor")
	readHelps(t, helps, buildPlugin(t, abs), doctest.ParseCobraHelp, "status", "verify", "storage-e2e")
	vars := makeVars(t)
	mk := exec.Command("make", "--no-print-directory", "-s", "help")
	mk.Dir = abs
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	targets := doctest.HelpTargets(string(out))
	files := claimFiles(t)
	nFlags, nTargets, nVars := 0, 0, 0
	for _, f := range files {
		// Errors name f as the tree calls it.
		nFlags += checkClaims(t, f, func(c doctest.FlagClaim) error { c.File = f; return c.Check(helps) }, doctest.FlagClaims, doctest.KubectlFlagClaims)
		nTargets += checkClaims(t, f, func(c doctest.MakeClaim) error { c.File = f; return c.Check(targets) }, doctest.MakeClaims)
		nVars += checkClaims(t, f, func(c doctest.MakeVarClaim) error { c.File = f; return c.Check(vars) }, doctest.MakeVarClaims)
	}
	t.Logf("%d flag defaults and flags, %d make targets and %d make variables named in %d files, checked", nFlags, nTargets, nVars, len(files))

	// Every flag of register is in the README's table or operating.md's.
	var registerClaims []doctest.FlagClaim
	for _, f := range []string{"README.md", "docs/operating.md"} {
		fc, err := doctest.FlagClaims(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range fc {
			if c.Command == "register" || c.Command == "" {
				registerClaims = append(registerClaims, c)
			}
		}
	}
	if missing := doctest.Undocumented(helps["register"], registerClaims); len(missing) > 0 {
		t.Errorf("flags of `csi-registrar register --help` in no flag table of README.md or docs/operating.md: %q: add a row with the default and meaning", missing)
	}
}

// buildPlugin builds the kubectl plugin (cmd/kubectl-csi_registrar) and
// returns its path. With the race detector on (make test), with it too: the
// plugin's tests have compiled its packages so. The binary is kept in the
// user's cache directory, one per checkout, so that go build, finding it up to
// date, skips the link (35 MB: about 7 s of CPU) the next time.
func buildPlugin(t *testing.T, abs string) string {
	t.Helper()
	dir := t.TempDir()
	if cache, err := os.UserCacheDir(); err == nil {
		sum := sha256.Sum256([]byte(abs))
		dir = filepath.Join(cache, "csi-registrar", "doctest", hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	name := "kubectl-csi_registrar"
	args := []string{"build"}
	if raceEnabled {
		name += "-race"
		args = append(args, "-race")
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", append(args, "-o", bin, "./cmd/kubectl-csi_registrar")...)
	cmd.Dir = abs
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-csi_registrar: %v\n%s", err, out)
	}
	t.Logf("built the kubectl plugin (%s) in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// makeVars reads the build's variables: the Makefile, the files it
// includes, and the scripts and Go programs under kind/ its recipes run.
func makeVars(t *testing.T) doctest.MakeVars {
	t.Helper()
	makefiles := []string{filepath.Join(root, "Makefile")}
	var scripts []string
	err := filepath.WalkDir(filepath.Join(root, "kind"), func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case strings.HasSuffix(p, ".mk"):
			makefiles = append(makefiles, p)
		case strings.HasSuffix(p, ".sh"), strings.HasSuffix(p, ".go"):
			scripts = append(scripts, p) // a Go test reads the variables make exports (E2E_ARGS, ...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := doctest.ReadMakeVars(makefiles, scripts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
