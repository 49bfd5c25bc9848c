package proofmap

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// MaxStaleCommits is how many commits may touch a slice's paths after its
// last green run before TestSlicesGreen fails: .ci/run runs one slice a
// landing and cannot commit what it saw, so a developer runs `make ci-full`
// (or one slice) and commits .ci/slices.tsv at least this often.
const MaxStaleCommits = 80

// GreenRun is a row of .ci/slices.tsv: the last run in which a slice passed.
type GreenRun struct {
	Slice   int
	Commit  string
	Date    string
	Seconds int
}

// ReadGreen reads .ci/slices.tsv (lines starting with # are comments).
func ReadGreen(file string) (map[int]GreenRun, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]GreenRun{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: %q: want slice, commit, date, seconds separated by tabs (as .ci/run writes them)", file, n, l)
		}
		slice, err1 := strconv.Atoi(f[0])
		secs, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: %q: the slice and the seconds must be integers", file, n, l)
		}
		out[slice] = GreenRun{Slice: slice, Commit: f[1], Date: f[2], Seconds: secs}
	}
	return out, sc.Err()
}

// Stale returns what is wrong with the slices' last green runs in the git
// work tree dir: a slice never recorded, recorded at a commit that is not
// an ancestor of HEAD, or whose paths more than max commits touched since.
func Stale(dir string, slices []Slice, green map[int]GreenRun, max int) ([]string, error) {
	var errs []string
	for _, s := range slices {
		g, ok := green[s.N]
		fix := fmt.Sprintf("run `make ci-full SLICE=%d` on a clean tree and commit .ci/slices.tsv", s.N)
		if !ok {
			errs = append(errs, fmt.Sprintf("slice %d (%s) has no green run in .ci/slices.tsv: %s", s.N, s.Title, fix))
			continue
		}
		if _, err := git(dir, "merge-base", "--is-ancestor", g.Commit, "HEAD"); err != nil {
			errs = append(errs, fmt.Sprintf("slice %d (%s): its green run's commit %s is not an ancestor of HEAD: %s", s.N, s.Title, g.Commit, fix))
			continue
		}
		out, err := git(dir, append([]string{"rev-list", "--count", g.Commit + "..HEAD", "--"}, s.Paths...)...)
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return nil, fmt.Errorf("git rev-list --count: %q", out)
		}
		if n > max {
			errs = append(errs, fmt.Sprintf("slice %d (%s) last passed at %s (%s); %d commits touched its paths since, more than %d: %s", s.N, s.Title, g.Commit, g.Date, n, max, fix))
		}
	}
	return errs, nil
}

// Shallow reports whether dir is a shallow clone (its history cut short:
// a slice's green commit may be missing from it).
func Shallow(dir string) (bool, error) {
	out, err := git(dir, "rev-parse", "--is-shallow-repository")
	return strings.TrimSpace(out) == "true", err
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			return string(out), fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return string(out), fmt.Errorf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out), nil
}
