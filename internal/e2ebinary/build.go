package e2ebinary

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/mod/modfile"
	"golang.org/x/sys/unix"
)

// Options say which binary Build makes and where it keeps it.
type Options struct {
	Release Release
	// CacheDir holds a directory per release, e.g. <CacheDir>/v1.37.2/:
	// e2e.test, its stamp, the module it was built from and the build's
	// log. Default: DefaultCacheDir().
	CacheDir string
	// ModuleDir, when set, is a module to build in as it is, instead of
	// the one Build generates: one that requires k8s.io/kubernetes at
	// Release with its go.mod and go.sum complete, as the nested modules of
	// kind/localnode/k8sbuild are (`make e2e-storage` builds in those, so
	// that the binary's packages are those of the local node's Kubernetes).
	// It is not changed (-mod=readonly).
	ModuleDir string
	// Go is the go command; default "go" (from PATH).
	Go string
	// Logger receives the progress: the build's start, a line a minute
	// while the compiler runs, the result. The zero Logger discards it.
	Logger logr.Logger
}

// Binary is an e2e test binary in the cache.
type Binary struct {
	Path    string
	Release Release
	// Built is false when the binary was there, built before by the same
	// recipe (and nothing was run).
	Built bool
	Took  time.Duration // the build's, when Built
}

// DefaultCacheDir is csi-registrar/e2e under the user's cache directory
// ($XDG_CACHE_HOME, else ~/.cache).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "csi-registrar", "e2e"), nil
}

// Path is where Build keeps the binary of r under cacheDir.
func Path(cacheDir string, r Release) string {
	return filepath.Join(cacheDir, r.String(), "e2e.test")
}

// recipeRevision names the recipe below (the generated module, the go
// command's flags, the linker's): change it when they change, so that
// binaries built by the old recipe are built again.
const recipeRevision = "1"

// buildFlags are the flags of `go test -c` besides -ldflags and -o.
// -trimpath and CGO_ENABLED=0, as kind/localnode/build.sh builds the
// Kubernetes binaries, so that both find each other's packages in the Go
// build cache.
func buildFlags() []string { return []string{"test", "-c", "-trimpath", "-buildvcs=false"} }

// stamp identifies the recipe a binary of r was built by.
func stamp(r Release) string {
	return fmt.Sprintf("e2e.test %s, recipe %s: CGO_ENABLED=0 go %s -ldflags '%s' %s\n",
		r, recipeRevision, strings.Join(buildFlags(), " "), ldflags(r, "<tag time>"), E2EPackage)
}

// ldflags strips the binary and stamps the release as Kubernetes' own build
// does (hack/lib/version.sh): the suite prints it, and --version answers it.
// The build date is the tag's time, so that a build is reproducible.
func ldflags(r Release, date string) string {
	minor := fmt.Sprint(r.Minor)
	if r.Pre != "" {
		minor += "+"
	}
	flags := []string{"-s", "-w"}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+r.String(), "-X", pkg+".gitMajor="+fmt.Sprint(r.Major), "-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean", "-X", pkg+".buildDate="+date)
	}
	return strings.Join(flags, " ")
}

// Build returns the e2e test binary of o.Release from o.CacheDir, building
// it there first unless a binary built by the same recipe is there. It
// holds the lock of the release's directory while it looks and builds:
// a second Build of the release waits for the first and then finds its
// binary. The module it builds from is generated with ModuleFile and
// resolved with `go mod tidy` (the module proxy, for what the module
// cache lacks). Errors: a *LookUpError when the release cannot be found,
// a *GoError when the module does not resolve or does not compile.
func Build(ctx context.Context, o Options) (*Binary, error) {
	if o.Go == "" {
		o.Go = "go"
	}
	if o.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache directory for the e2e test binary: %w", err)
		}
		o.CacheDir = d
	}
	log := o.Logger
	r := o.Release
	dir := filepath.Join(o.CacheDir, r.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lock(ctx, filepath.Join(dir, "build.lock"), log)
	if err != nil {
		return nil, err
	}
	defer unlock()

	bin := &Binary{Path: Path(o.CacheDir, r), Release: r}
	stampFile := filepath.Join(dir, "stamp")
	if current(bin.Path, stampFile, stamp(r)) {
		log.V(1).Info("e2e test binary is current", "path", bin.Path, "release", r)
		return bin, nil
	}
	start := time.Now()
	modDir, modFlag := o.ModuleDir, "-mod=readonly"
	if modDir != "" {
		if err := requiresRelease(modDir, r); err != nil {
			return nil, err
		}
	}
	info, err := LookUp(ctx, o.Go, r)
	if err != nil {
		return nil, err
	}
	if modDir == "" {
		modDir, modFlag = filepath.Join(dir, "module"), "-mod=mod"
		m := Module{
			Path:     "csi-registrar.invalid/e2ebuild",
			Comment:  "Written by csi-registrar (internal/e2ebinary) to build " + E2EPackage + " at " + r.String() + "; written again by each build.",
			Release:  r,
			Packages: []string{E2EPackage},
			Doc:      []string{"Package k8sbuild only pins the package built: " + E2EPackage + "."},
		}
		log.Info("Resolving the e2e test module", "release", r, "dir", modDir)
		if err := WriteModule(ctx, o.Go, modDir, m, info); err != nil {
			return nil, fmt.Errorf("%s at %s does not resolve through the module proxy: %w", E2EPackage, r, err)
		}
	}
	tmp := bin.Path + ".tmp"
	args := append(buildFlags(), "-ldflags", ldflags(r, info.Time.UTC().Format(time.RFC3339)), "-o", tmp, E2EPackage)
	log.Info("Building Kubernetes' e2e test binary: a cold build takes about 25 CPU-minutes, with the Go build cache warm a minute or two",
		"release", r, "command", "go "+strings.Join(args, " "))
	stop := heartbeat(log, start)
	err = goRun(ctx, o.Go, modDir, modFlag, []string{"CGO_ENABLED=0"}, args...)
	stop()
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, bin.Path); err != nil {
		return nil, err
	}
	if err := os.WriteFile(stampFile, []byte(stamp(r)), 0o644); err != nil {
		return nil, err
	}
	bin.Built, bin.Took = true, time.Since(start)
	var size int64
	if fi, err := os.Stat(bin.Path); err == nil {
		size = fi.Size()
	}
	log.Info("Built the e2e test binary", "path", bin.Path, "release", r, "took", bin.Took.Round(time.Second), "MB", size>>20)
	return bin, nil
}

// requiresRelease checks that the module in dir requires k8s.io/kubernetes
// at r.
func requiresRelease(dir string, r Release) error {
	p := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	f, err := modfile.ParseLax(p, data, nil)
	if err != nil {
		return err
	}
	for _, req := range f.Require {
		if req.Mod.Path == KubernetesModule {
			if req.Mod.Version != r.String() {
				return fmt.Errorf("%s requires %s %s, not %s", p, KubernetesModule, req.Mod.Version, r)
			}
			return nil
		}
	}
	return fmt.Errorf("%s does not require %s", p, KubernetesModule)
}

// current reports whether bin is an executable built by the recipe want.
func current(bin, stampFile, want string) bool {
	fi, err := os.Stat(bin)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return false
	}
	got, err := os.ReadFile(stampFile)
	return err == nil && string(got) == want
}

// heartbeat logs a line a minute until stop is called: the go command is
// silent while it compiles, for minutes.
func heartbeat(log logr.Logger, start time.Time) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				log.Info("Still compiling the e2e test binary", "elapsed", time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done) }
}

// lock takes the exclusive lock of file (flock(2), as flock(1) takes it),
// waiting for another holder until ctx ends.
func lock(ctx context.Context, file string, log logr.Logger) (unlock func(), err error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	waiting := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", file, err)
		}
		if !waiting {
			log.Info("Another build of this e2e test binary is running: waiting for it", "lock", file)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
