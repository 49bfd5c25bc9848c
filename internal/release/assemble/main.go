// Command assemble is `make release`: with -build it first builds the
// image's and the kubectl plugin's static binaries for every platform of
// the release into the release directory, then it writes the
// multi-platform OCI archive of the image's binaries, the image's digest,
// the SBOM, the kubectl plugin's archives and krew manifest, and
// SHA256SUMS there (package internal/release). Exit 2 for bad input, 1 for
// other errors.
//
//	go run ./internal/release/assemble -build -ldflags '-s -w -X main.version=v0.1.0' -dir bin/release -version v0.1.0 -created 1700000000 -tags T1,T2 [-revision HASH] [-download-url URL]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/release"
)

func main() {
	var opts release.Options
	var created int64
	var build bool
	var ldflags, goCmd string
	flag.StringVar(&opts.Dir, "dir", "bin/release", "the release directory, holding the binaries")
	flag.StringVar(&opts.Version, "version", "", "the release version, vX.Y.Z[-PRE]")
	flag.Int64Var(&created, "created", 0, "the image's creation time in Unix seconds (the commit's time)")
	flag.StringVar(&opts.Revision, "revision", "", "the source commit (label org.opencontainers.image.revision)")
	flag.StringVar(&opts.ModuleDir, "module-dir", ".", "the main module's directory")
	flag.StringVar(&opts.MainPackage, "main", "./cmd/csi-registrar", "the command the binaries were built from")
	flag.StringVar(&opts.BuildTags, "tags", "", "the build tags the binaries are built with (go build -tags, and the SBOM's)")
	flag.StringVar(&opts.DownloadURL, "download-url", "", "where the release's files are downloaded from, ending in / (the krew manifest's URIs); default: the GitHub release of -version")
	flag.BoolVar(&build, "build", false, "build the binaries first (go build, one per command and platform)")
	flag.StringVar(&ldflags, "ldflags", "", "with -build: go build -ldflags, which must set -X main.version to -version")
	flag.StringVar(&goCmd, "go", "go", "with -build: the go command")
	flag.Parse()
	if created > 0 {
		opts.Created = time.Unix(created, 0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, opts, build, release.BuildOptions{
		Dir: opts.Dir, Version: opts.Version, Go: goCmd, ModuleDir: opts.ModuleDir, Tags: opts.BuildTags, LDFlags: ldflags, Log: os.Stdout,
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "make release:", err)
		if errors.Is(err, release.ErrBadInput) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, opts release.Options, build bool, bo release.BuildOptions) error {
	start := time.Now()
	if build {
		if err := release.Build(ctx, bo); err != nil {
			return err
		}
	}
	res, err := release.Assemble(opts)
	if err != nil {
		return err
	}
	fmt.Printf("%s: image index %s (%d bytes) of %d platforms, %s lists %d files:\n",
		res.Archive, res.Index.Digest, res.Index.Size, len(release.Platforms()), release.SumsFile, len(res.Files))
	for _, n := range append(res.Files, release.SumsFile) {
		st, err := os.Stat(filepath.Join(opts.Dir, n))
		if err != nil {
			return err
		}
		fmt.Printf("  %10d  %s\n", st.Size(), n)
	}
	fmt.Printf("built and assembled in %s\n", time.Since(start).Round(time.Second))
	return nil
}
