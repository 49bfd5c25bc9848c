package doctest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/doctest"
	"github.com/csi-registrar/csi-registrar/internal/testwait"
)

// write creates files under a new directory and returns it.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const page = "# Title\n\n" +
	"```sh test\necho one\n```\n\n" +
	"- a list item:\n\n  ```bash ci\n  make demo   # the demo\n  ```\n\n" +
	"~~~sh\nuntagged\n~~~\n\n" +
	"````text\n```sh\nnot a block: inside a longer fence\n```\n````\n\n" +
	"```\nno language\n```\n\n" +
	"```go test\nfunc f() {}\n```\n\n" +
	"```console test\n$ ls\n```\n\n" +
	"```sh later\nx\n```\n"

func TestBlocks(t *testing.T) {
	dir := write(t, map[string]string{"p.md": page})
	bs, err := doctest.Blocks(filepath.Join(dir, "p.md"))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		line      int
		lang, tag string
		text      string
		err       string // a substring of Check's error, "" for none
	}
	wants := []want{
		{3, "sh", "test", "echo one\n", ""},
		{9, "bash", "ci", "make demo   # the demo\n", ""},
		{13, "sh", "", "untagged\n", "untagged ```sh block"},
		{17, "text", "", "```sh\nnot a block: inside a longer fence\n```\n", ""},
		{23, "", "", "no language\n", "without a language"},
		{27, "go", "test", "func f() {}\n", "only shell blocks"},
		{31, "console", "test", "$ ls\n", "cannot be run"},
		{35, "sh", "later", "x\n", `unknown tag "later"`},
	}
	if len(bs) != len(wants) {
		t.Fatalf("got %d blocks, want %d: %+v", len(bs), len(wants), bs)
	}
	for i, w := range wants {
		b := bs[i]
		if b.Line != w.line || b.Lang != w.lang || string(b.Tag) != w.tag || b.Text != w.text {
			t.Errorf("block %d = line %d lang %q tag %q text %q, want line %d lang %q tag %q text %q",
				i, b.Line, b.Lang, b.Tag, b.Text, w.line, w.lang, w.tag, w.text)
		}
		err := b.Check()
		switch {
		case w.err == "" && err != nil:
			t.Errorf("block %d: unexpected error %v", i, err)
		case w.err != "" && (err == nil || !strings.Contains(err.Error(), w.err)):
			t.Errorf("block %d: error %v, want one containing %q", i, err, w.err)
		}
	}
	if got := bs[1].Commands(); len(got) != 1 || got[0] != "make demo" {
		t.Errorf("Commands() = %q, want [make demo]", got)
	}
}

func TestBlocksUnclosed(t *testing.T) {
	dir := write(t, map[string]string{"p.md": "text\n```sh test\necho\n"})
	if _, err := doctest.Blocks(filepath.Join(dir, "p.md")); err == nil || !strings.Contains(err.Error(), "never closed") {
		t.Errorf("err = %v, want a block never closed", err)
	}
}

func TestCheckCI(t *testing.T) {
	dir := write(t, map[string]string{"run": "run \"make demo\" make --no-print-directory demo\n" +
		"  run \"make demo KIND=1\" make --no-print-directory demo KIND=1\nmake other\n"})
	steps, err := doctest.CISteps(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	ok := doctest.Block{Lang: "sh", Tag: doctest.CI, Text: "# comment\nmake demo\nmake demo KIND=1   # kind\n"}
	if err := ok.CheckCI(steps); err != nil {
		t.Error(err)
	}
	bad := doctest.Block{Lang: "sh", Tag: doctest.CI, Text: "make demo\nmake other\n"}
	if err := bad.CheckCI(steps); err == nil || !strings.Contains(err.Error(), `"make other"`) {
		t.Errorf("err = %v, want one naming make other", err)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Quick start":                      "quick-start",
		"`csi-registrar doctor`":           "csi-registrar-doctor",
		"Rolling updates and `maxSurge`":   "rolling-updates-and-maxsurge",
		`"driver name X not found" (1.36)`: "driver-name-x-not-found-136",
		"[Unreleased]":                     "unreleased",
		"[Link](https://example.com) text": "link-text",
		"Écrire un_pilote":                 "écrire-un_pilote",
	} {
		if got := doctest.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLinks(t *testing.T) {
	dir := write(t, map[string]string{
		"README.md": "# Top\n\n## Same\n\n## Same\n\n" +
			"[ok](docs/a.md#part-two) [ok](#same-1) [ok](docs/) [ok](https://example.com/x) [ok](go.mod#L3)\n" +
			"[missing](docs/b.md) [anchor](docs/a.md#nope) [self](#nothing) [abs](/etc/passwd) [up](../x.md)\n" +
			"[bad](https://) [scheme](ftp://example.com/) `[code](nowhere.md)` <https://example.org>\n\n" +
			"```sh illustrative\n[in a block](nowhere.md)\n```\n\n[ref]: docs/gone.md\n",
		"docs/a.md": "# A\n\n## Part two\n",
		"go.mod":    "module x\n",
	})
	links, err := doctest.Links(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, l := range links {
		l.File = filepath.Join(dir, "README.md")
		if err := doctest.CheckLink(dir, l); err != nil {
			bad = append(bad, l.Target)
		}
	}
	want := []string{"docs/b.md", "docs/a.md#nope", "#nothing", "/etc/passwd", "../x.md", "https://", "ftp://example.com/", "docs/gone.md"}
	if strings.Join(bad, " ") != strings.Join(want, " ") {
		t.Errorf("links refused: %q\nwant:          %q", bad, want)
	}
	if len(links) != 14 {
		t.Errorf("found %d links, want 14 (none from code): %+v", len(links), links)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	ok := doctest.Block{File: "p.md", Line: 1, Lang: "sh", Tag: doctest.Test, Text: "pwd\necho $X\n"}
	out, err := doctest.Run(context.Background(), ok, dir, []string{"X=value", "PATH=" + os.Getenv("PATH")})
	if err != nil || !strings.Contains(string(out), dir) || !strings.Contains(string(out), "value") {
		t.Errorf("Run = %q, %v; want the directory and the variable", out, err)
	}
	// -e, -u and pipefail: each of these lines alone fails the block.
	for _, text := range []string{"false\necho after\n", "echo $UNSET_VARIABLE_XYZ\n", "false | true\n"} {
		b := doctest.Block{File: "p.md", Line: 1, Lang: "sh", Tag: doctest.Test, Text: text}
		if _, err := doctest.Run(context.Background(), b, dir, []string{"PATH=" + os.Getenv("PATH")}); err == nil {
			t.Errorf("Run(%q) succeeded, want a failure", text)
		}
	}
}

// TestRunKillsLeftovers: a background process a block leaves running is
// killed when the block ends, and a block that does not end fails when its
// context is done, with its output so far.
func TestRunKillsLeftovers(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	b := doctest.Block{File: "p.md", Line: 1, Lang: "sh", Tag: doctest.Test, Text: "sleep 300 &\necho $! >" + pidFile + "\n"}
	if out, err := doctest.Run(context.Background(), b, dir, []string{"PATH=" + os.Getenv("PATH")}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		t.Fatal(err)
	}
	// Gone, or a zombie waiting for init to reap it: its pidfd says so.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := testwait.Exit(wctx, n); err != nil {
		t.Fatalf("the block's background sleep (pid %d) still runs after the block ended: %v", n, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	hang := doctest.Block{File: "p.md", Line: 1, Lang: "sh", Tag: doctest.Test, Text: "echo started\nsleep 300 &\nwait\n"}
	start := time.Now()
	out, err := doctest.Run(ctx, hang, dir, []string{"PATH=" + os.Getenv("PATH")})
	if err == nil || !strings.Contains(err.Error(), "did not end") || !strings.Contains(string(out), "started") {
		t.Errorf("Run of a hanging block = %q, %v; want its output and an error saying it did not end", out, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run of a hanging block took %s after its context ended", d)
	}
}

// TestClaimsCaught: a page with a wrong default (in a table and in prose)
// and a make target that does not exist fails the checks; the true ones pass.
func TestClaimsCaught(t *testing.T) {
	dir := write(t, map[string]string{"p.md": "# `csi-registrar register`\n\n" +
		"| flag | default | meaning |\n|---|---|---|\n" +
		"| `--timeout` | `1s` | right |\n" +
		"| `--kubelet-wait` | `3m` | wrong |\n" +
		"| `--kubelet-registration-path` | required | right |\n" +
		"| `--mode` | | listed: exists |\n" +
		"| `--no-such-flag` | `1` | not a flag |\n" +
		"| `--gone-flag` | | listed, not a flag |\n\n" +
		"`--registration-retry-max` (5 min by default), `--connection-timeout=1s`, the default.\n\n" +
		"Run `make test`, then `make no-such-target K8S=1.34`; not `make local-*`.\n\n" +
		"```sh illustrative\nmake -n bench   # make sure\nmake -C ../mydriver verify   # another Makefile's target: not checked\n```\n"})
	help := parseHelpOf(t, "   --timeout value                    timeout (default: 1s) [$CSI_REGISTRAR_TIMEOUT]\n"+
		"   --kubelet-wait value               re-create (default: 2m0s) [$CSI_REGISTRAR_KUBELET_WAIT]\n"+
		"   --kubelet-registration-path value  the path (required) [$X]\n"+
		"   --mode value                       deprecated [$X]\n"+
		"   --registration-retry-max value     cap (default: 5m0s) [$X]\n"+
		"   --connection-timeout value         wait (default: 0s) [$X]\n")
	claims, err := doctest.FlagClaims(filepath.Join(dir, "p.md"))
	if err != nil {
		t.Fatal(err)
	}
	var wrong []string
	for _, c := range claims {
		if err := c.Check(map[string]map[string]doctest.FlagHelp{"register": help}); err != nil {
			wrong = append(wrong, c.Flag)
			t.Logf("caught: %v", err)
		}
	}
	if got, want := strings.Join(wrong, " "), "kubelet-wait no-such-flag gone-flag connection-timeout"; got != want {
		t.Errorf("flags caught = %q, want %q (of %d claims)", got, want, len(claims))
	}
	if got := doctest.Undocumented(help, claims); len(got) != 0 {
		t.Errorf("every flag of the help is in the table, but %q are called undocumented", got)
	}
	help["enable-pprof"] = parseHelpOf(t, "   --enable-pprof   also serve /debug/pprof/ (default: false) [$X]\n")["enable-pprof"]
	if got := strings.Join(doctest.Undocumented(help, claims), " "); got != "enable-pprof" {
		t.Errorf("undocumented flags = %q, want enable-pprof", got)
	}

	mc, err := doctest.MakeClaims(filepath.Join(dir, "p.md"))
	if err != nil {
		t.Fatal(err)
	}
	targets := doctest.HelpTargets("test      vet, gofmt\nbench     figures\n")
	var missing []string
	for _, c := range mc {
		if err := c.Check(targets); err != nil {
			missing = append(missing, c.Target)
			t.Logf("caught: %v", err)
		}
	}
	if got := strings.Join(missing, " "); got != "no-such-target" || len(mc) != 3 {
		t.Errorf("targets caught = %q of %d named, want no-such-target of 3 (test, no-such-target, bench)", got, len(mc))
	}
}

// parseHelpOf parses a --help text and checks it found a flag.
func parseHelpOf(t *testing.T, help string) map[string]doctest.FlagHelp {
	t.Helper()
	h := doctest.ParseHelp(help)
	if len(h) == 0 {
		t.Fatalf("no flag found in %q", help)
	}
	return h
}
