package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildOptions say how Build builds a release's binaries.
type BuildOptions struct {
	// Dir is the release directory; Build creates it.
	Dir string
	// Version is the release's version (CheckVersion); LDFlags must set
	// main.version to it.
	Version string
	// Go is the go command; empty: "go".
	Go string
	// ModuleDir is the main module's directory.
	ModuleDir string
	// Tags and LDFlags are the -tags and -ldflags of the Makefile's
	// GOBUILD, with which `make build` builds.
	Tags, LDFlags string
	// Log receives one line per binary built; nil: none.
	Log io.Writer
}

// command is a main package a release ships a binary of, per platform,
// with the function that names the file.
type command struct {
	pkg  string
	name func(version, arch string) string
}

// commands are the image's binary and the kubectl plugin.
func commands() []command {
	return []command{{"./cmd/csi-registrar", BinaryName}, {"./cmd/kubectl-csi_registrar", PluginBinaryName}}
}

// CheckBuildOptions checks opts before anything is written.
func CheckBuildOptions(opts BuildOptions) error {
	if opts.Version == "" {
		return fmt.Errorf("%w: no version: name it, make release VERSION=vMAJOR.MINOR.PATCH (e.g. v0.1.0), as the release's git tag names it", ErrBadInput)
	}
	if err := CheckVersion(opts.Version); err != nil {
		return err
	}
	if want := "-X main.version=" + opts.Version; !strings.Contains(" "+opts.LDFlags+" ", " "+want+" ") {
		return fmt.Errorf("%w: -ldflags %q does not set the version: want %s in it (the Makefile's LDFLAGS with VERSION=%s)", ErrBadInput, opts.LDFlags, want, opts.Version)
	}
	if opts.Dir == "" {
		return fmt.Errorf("%w: no release directory", ErrBadInput)
	}
	return nil
}

// Build writes into opts.Dir, for every platform of Platforms, the
// image's binary (BinaryName) and the kubectl plugin's (PluginBinaryName),
// static (CGO_ENABLED=0) and built as `make build` builds them (-trimpath,
// opts.Tags, opts.LDFlags). It first removes the files of an earlier
// release there, and only those: the names BinaryName, PluginBinaryName and
// the other Assemble outputs give, of any version, and SumsFile.
func Build(ctx context.Context, opts BuildOptions) error {
	if err := CheckBuildOptions(opts); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return err
	}
	if err := removeEarlier(opts.Dir); err != nil {
		return err
	}
	goCmd := opts.Go
	if goCmd == "" {
		goCmd = "go"
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	for _, c := range commands() {
		for _, p := range Platforms() {
			out := filepath.Join(dir, c.name(opts.Version, p.GOARCH))
			cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-tags", opts.Tags, "-ldflags", opts.LDFlags, "-o", out, c.pkg)
			cmd.Dir = opts.ModuleDir
			cmd.Env = append(os.Environ(), p.Env()...)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %s for %s: %v\n%s", c.pkg, p, err, b)
			}
			if opts.Log != nil {
				fmt.Fprintf(opts.Log, "built %s (%s)\n", filepath.Base(out), p)
			}
		}
	}
	return nil
}

// removeEarlier removes, from dir, the files a release writes there (the
// prefixes csi-registrar-v and kubectl-csi_registrar-v, and SumsFile), and
// nothing else.
func removeEarlier(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if n == SumsFile || strings.HasPrefix(n, "csi-registrar-v") || strings.HasPrefix(n, PluginBin+"-v") {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}
