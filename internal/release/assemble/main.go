// Command assemble is the last step of `make release`: it writes the
// multi-architecture OCI archive of the binaries the Makefile built, the
// image's digest, the SBOM, the kubectl plugin's archives and krew manifest,
// and SHA256SUMS into the release directory (package
// internal/release). Exit 2 for bad input, 1 for other errors.
//
//	go run ./internal/release/assemble -dir bin/release -version v0.1.0 -created 1700000000 -tags T1,T2 [-revision HASH] [-download-url URL]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/release"
)

func main() {
	var opts release.Options
	var created int64
	flag.StringVar(&opts.Dir, "dir", "bin/release", "the release directory, holding the binaries")
	flag.StringVar(&opts.Version, "version", "", "the release version, vX.Y.Z[-PRE]")
	flag.Int64Var(&created, "created", 0, "the image's creation time in Unix seconds (the commit's time)")
	flag.StringVar(&opts.Revision, "revision", "", "the source commit (label org.opencontainers.image.revision)")
	flag.StringVar(&opts.ModuleDir, "module-dir", ".", "the main module's directory")
	flag.StringVar(&opts.MainPackage, "main", "./cmd/csi-registrar", "the command the binaries were built from")
	flag.StringVar(&opts.BuildTags, "tags", "", "the build tags the binaries were built with (for the SBOM)")
	flag.StringVar(&opts.DownloadURL, "download-url", "", "where the release's files are downloaded from, ending in / (the krew manifest's URIs); default: the GitHub release of -version")
	flag.Parse()
	if created > 0 {
		opts.Created = time.Unix(created, 0)
	}
	res, err := release.Assemble(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "assemble:", err)
		if errors.Is(err, release.ErrBadInput) {
			os.Exit(2)
		}
		os.Exit(1)
	}
	fmt.Printf("%s: image index %s (%d bytes), %s lists %d files\n", res.Archive, res.Index.Digest, res.Index.Size, release.SumsFile, len(res.Files))
}
