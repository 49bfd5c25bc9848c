package release

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// apache2SHA256 is the SHA-256 of the Apache License 2.0 text as the Apache
// Software Foundation publishes it (LICENSE-2.0.txt).
const apache2SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLicense: LICENSE is the unmodified Apache-2.0 text, the license the
// Dockerfile's and the release image's labels name; the release image has
// the Dockerfile's title and description.
func TestLicense(t *testing.T) {
	if got := sha256Hex([]byte(readRepoFile(t, "LICENSE"))); got != apache2SHA256 {
		t.Errorf("LICENSE: SHA-256 %s, want %s (the Apache-2.0 text unmodified)", got, apache2SHA256)
	}
	dockerfile := readRepoFile(t, "Dockerfile")
	labels := ImageOptions{Version: "v0.1.0", Created: time.Unix(0, 0)}.Labels()
	for _, k := range []string{"licenses", "title", "description"} {
		key := "org.opencontainers.image." + k
		m := regexp.MustCompile(regexp.QuoteMeta(key) + `="([^"]*)"`).FindStringSubmatch(dockerfile)
		if m == nil || m[1] != labels[key] {
			t.Errorf("label %s: Dockerfile %q, release image %q", key, m, labels[key])
		}
	}
	if labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("release image license label %q, LICENSE is Apache-2.0", labels["org.opencontainers.image.licenses"])
	}
}

// TestChangelog: CHANGELOG.md follows Keep a Changelog: an Unreleased section
// first, then `## [X.Y.Z] - YYYY-MM-DD` sections, newest first, with the
// standard kinds of change, and a link for every section.
func TestChangelog(t *testing.T) {
	text := readRepoFile(t, "CHANGELOG.md")
	kinds := map[string]bool{"Added": true, "Changed": true, "Deprecated": true, "Removed": true, "Fixed": true, "Security": true}
	release := regexp.MustCompile(`^## \[(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\] - (\d{4}-\d{2}-\d{2})$`)
	var sections []string
	prev := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case n == 1 && line != "# Changelog":
			t.Errorf("CHANGELOG.md:1: %q, want # Changelog", line)
		case strings.HasPrefix(line, "## "):
			if len(sections) == 0 {
				if line != "## [Unreleased]" {
					t.Errorf("CHANGELOG.md:%d: first section %q, want ## [Unreleased]", n, line)
				}
				sections = append(sections, "Unreleased")
				continue
			}
			m := release.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("CHANGELOG.md:%d: %q, want ## [X.Y.Z] - YYYY-MM-DD", n, line)
				continue
			}
			if _, err := time.Parse("2006-01-02", m[2]); err != nil {
				t.Errorf("CHANGELOG.md:%d: date %s: %v", n, m[2], err)
			}
			if prev != "" && semver.Compare("v"+m[1], "v"+prev) >= 0 {
				t.Errorf("CHANGELOG.md:%d: %s after %s: newest first", n, m[1], prev)
			}
			prev = m[1]
			sections = append(sections, m[1])
		case strings.HasPrefix(line, "### "):
			if !kinds[strings.TrimPrefix(line, "### ")] {
				t.Errorf("CHANGELOG.md:%d: %q is none of Added, Changed, Deprecated, Removed, Fixed, Security", n, line)
			}
		}
	}
	if len(sections) == 0 {
		t.Fatal("CHANGELOG.md has no section")
	}
	for _, s := range sections {
		if !strings.Contains(text, "\n["+s+"]: https://") {
			t.Errorf("CHANGELOG.md: no link [%s]: https://...", s)
		}
	}
}

// TestModulePath: a driver author can `go get` the module once it is
// published: the module path is a valid, fetchable repository path without
// a major-version suffix (the release tags are v0/v1), and
// docs/writing-a-driver.md and stubdriver/GUIDE.md name the same
// `go get <module>@<tag>`.
func TestModulePath(t *testing.T) {
	mf, err := modfile.Parse("go.mod", []byte(readRepoFile(t, "go.mod")), nil)
	if err != nil {
		t.Fatal(err)
	}
	path := mf.Module.Mod.Path
	if err := module.CheckPath(path); err != nil {
		t.Errorf("go.mod module %s: %v", path, err)
	}
	if _, major, ok := module.SplitPathVersion(path); !ok || major != "" || len(strings.Split(path, "/")) != 3 || !strings.HasPrefix(path, "github.com/") {
		t.Errorf("go.mod module %s: want github.com/OWNER/REPO, the repository root, no /vN", path)
	}
	goGet := regexp.MustCompile(`go get ` + regexp.QuoteMeta(path) + `@(v[0-9A-Za-z.+-]+)`)
	var tags []string
	for _, f := range []string{"docs/writing-a-driver.md", "stubdriver/GUIDE.md"} {
		m := goGet.FindStringSubmatch(readRepoFile(t, f))
		if m == nil {
			t.Errorf("%s: no `go get %s@vX.Y.Z`", f, path)
			continue
		}
		if err := CheckVersion(m[1]); err != nil {
			t.Errorf("%s: go get %s@%s: %v", f, path, m[1], err)
		}
		tags = append(tags, m[1])
	}
	if len(tags) == 2 && tags[0] != tags[1] {
		t.Errorf("docs/writing-a-driver.md says %s, GUIDE.md %s", tags[0], tags[1])
	}
}
