package e2ebinary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// KubernetesModule is the module whose packages are built.
const KubernetesModule = "k8s.io/kubernetes"

// E2EPackage is the package of Kubernetes' e2e tests.
const E2EPackage = KubernetesModule + "/test/e2e"

// Module describes a Go module that builds packages of k8s.io/kubernetes at
// one release: the nested modules of kind/localnode/k8sbuild, or the one
// Build generates in its cache.
type Module struct {
	Path    string  // the module path, e.g. example.com/k8sbuild/1.37
	Comment string  // go.mod's first line, without "// "; empty: none
	Release Release // the release of k8s.io/kubernetes required
	// Packages are the packages of k8s.io/kubernetes tools.go imports, so
	// that `go mod tidy` keeps what they need. Sorted when written.
	Packages []string
	// Doc is tools.go's package documentation, one comment line a string,
	// without "// ".
	Doc []string
}

// ModuleFile returns m's go.mod before `go mod tidy` completes it: the go
// and godebug lines of k8s.io/kubernetes's own go.mod (kubernetesGoMod, at
// m.Release), the requirement of k8s.io/kubernetes, and a replacement of
// each module that go.mod replaces with a ./staging directory by the
// published version of that module at the release (m.Release's
// StagingVersion). Without those replacements the staging modules resolve
// to v0.0.0, which does not exist.
func ModuleFile(m Module, kubernetesGoMod []byte) ([]byte, error) {
	k, err := modfile.Parse("k8s.io/kubernetes@"+m.Release.String()+"/go.mod", kubernetesGoMod, nil)
	if err != nil {
		return nil, err
	}
	if k.Module == nil || k.Module.Mod.Path != KubernetesModule {
		return nil, fmt.Errorf("the go.mod given as %s's is another module's", KubernetesModule)
	}
	var b bytes.Buffer
	if m.Comment != "" {
		fmt.Fprintf(&b, "// %s\n", m.Comment)
	}
	fmt.Fprintf(&b, "module %s\n", m.Path)
	if k.Go != nil {
		fmt.Fprintf(&b, "\ngo %s\n", k.Go.Version)
	}
	if len(k.Godebug) > 0 {
		b.WriteString("\n")
		for _, g := range k.Godebug {
			fmt.Fprintf(&b, "godebug %s=%s\n", g.Key, g.Value)
		}
	}
	fmt.Fprintf(&b, "\nrequire %s %s\n", KubernetesModule, m.Release)
	var staging []string
	for _, r := range k.Replace {
		if r.New.Version == "" && strings.HasPrefix(r.New.Path, "./staging/") {
			staging = append(staging, r.Old.Path)
		}
	}
	if len(staging) == 0 {
		return nil, fmt.Errorf("%s@%s's go.mod replaces no module with a ./staging directory: not a go.mod this rule knows", KubernetesModule, m.Release)
	}
	b.WriteString("\nreplace (\n")
	for _, p := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", p, p, m.Release.StagingVersion())
	}
	b.WriteString(")\n")
	return b.Bytes(), nil
}

// ToolsFile returns m's tools.go: a file under the build tag tools that
// imports m.Packages, so that `go mod tidy` keeps their requirements.
func ToolsFile(m Module) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("//go:build tools\n\n")
	for _, l := range m.Doc {
		fmt.Fprintf(&b, "// %s\n", l)
	}
	b.WriteString("package k8sbuild\n\nimport (\n")
	pkgs := slices.Sorted(slices.Values(m.Packages))
	for _, p := range pkgs {
		fmt.Fprintf(&b, "\t_ %q\n", p)
	}
	b.WriteString(")\n")
	return format.Source(b.Bytes())
}

// Info is what the module proxy says of k8s.io/kubernetes at a release.
type Info struct {
	Version string
	Time    time.Time // the tag's time: the binaries' build date
	GoMod   string    // the module cache's copy of its go.mod
}

// LookUp asks the go command (the module cache, else the module proxy) for
// k8s.io/kubernetes at r. Only its go.mod is downloaded.
func LookUp(ctx context.Context, goCmd string, r Release) (*Info, error) {
	cmd := exec.CommandContext(ctx, goCmd, "list", "-m", "-json", KubernetesModule+"@"+r.String())
	// Outside any module: no go.mod or go.work of the caller's applies.
	cmd.Dir = os.TempDir()
	cmd.Env = goEnv("-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct {
		Info
		Error *struct{ Err string }
	}
	if jerr := json.Unmarshal(out, &info); err == nil && jerr != nil {
		err = jerr
	}
	if err == nil && info.Error != nil {
		err = errors.New(info.Error.Err)
	}
	if err == nil && info.GoMod == "" {
		err = errors.New("no go.mod in its answer")
	}
	if err != nil {
		return nil, &LookUpError{Release: r, Err: err, Output: strings.TrimSpace(stderr.String())}
	}
	return &info.Info, nil
}

// LookUpError is the go command failing to find k8s.io/kubernetes at a
// release: the release does not exist, or the module proxy cannot be
// reached.
type LookUpError struct {
	Release Release
	Err     error
	Output  string // the go command's standard error
}

func (e *LookUpError) Error() string {
	msg := fmt.Sprintf("go list -m %s@%s: %v", KubernetesModule, e.Release, e.Err)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

func (e *LookUpError) Unwrap() error { return e.Err }

// WriteModule writes m into dir (go.mod and tools.go; a go.sum there is
// removed) from k8s.io/kubernetes's go.mod at info, then runs `go mod tidy`
// there. With the go.sum it writes, m is complete.
func WriteModule(ctx context.Context, goCmd, dir string, m Module, info *Info) error {
	kgomod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return err
	}
	gomod, err := ModuleFile(m, kgomod)
	if err != nil {
		return err
	}
	tools, err := ToolsFile(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, "go.sum")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), tools, 0o644); err != nil {
		return err
	}
	return goRun(ctx, goCmd, dir, "-mod=mod", nil, "mod", "tidy")
}

// goRun runs the go command in dir, outside any go.work, with modFlag
// (-mod=mod or -mod=readonly) added to GOFLAGS; the error holds the end of
// its output.
func goRun(ctx context.Context, goCmd, dir, modFlag string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(goEnv(modFlag), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &GoError{Args: args, Dir: dir, Err: err, Output: tail(string(out), 40)}
	}
	return nil
}

// goEnv is the environment of the go commands run here: outside any
// go.work, modFlag added to the caller's GOFLAGS.
func goEnv(modFlag string) []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" "+modFlag))
}

// GoError is a go command that failed.
type GoError struct {
	Args   []string
	Dir    string
	Err    error
	Output string // its last lines
}

func (e *GoError) Error() string {
	return fmt.Sprintf("go %s (in %s): %v\n%s", strings.Join(e.Args, " "), e.Dir, e.Err, e.Output)
}

func (e *GoError) Unwrap() error { return e.Err }

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
