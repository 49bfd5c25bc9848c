// Command builde2e builds Kubernetes' e2e test binary for `make e2e-storage`
// (build-e2e.sh runs it) with internal/e2ebinary, as `kubectl csi-registrar
// storage-e2e` builds it, into the same cache: either finds the other's
// binary of a release. Here it builds in the local node's nested module of
// the release (kind/localnode/k8sbuild/<minor>), whose go.sum is pinned and
// whose packages the local node's Kubernetes was built from.
//
//	go run ./kind/storage/builde2e -release v1.37.2 [-module DIR] [-cache-dir DIR] [-path]
//
// It prints the binary's path on standard output, its progress on standard
// error; -path prints the path only, building nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2/textlogger"

	"github.com/csi-registrar/csi-registrar/internal/e2ebinary"
)

func main() {
	release := flag.String("release", "", "the Kubernetes release, e.g. v1.37.2 (kind/localnode/env.sh's K8S_VERSION)")
	module := flag.String("module", "", "a module requiring k8s.io/kubernetes at the release to build in (kind/localnode/k8sbuild/<minor>); empty: one generated in the cache")
	cacheDir := flag.String("cache-dir", "", "the cache of built binaries; empty: kubectl csi-registrar storage-e2e's default")
	pathOnly := flag.Bool("path", false, "print where the binary is (or will be) and build nothing")
	flag.Parse()
	r, err := e2ebinary.ParseRelease(*release)
	if err != nil || flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "builde2e: -release %v; usage: builde2e -release v1.MINOR.PATCH [-module DIR] [-cache-dir DIR] [-path]\n", err)
		os.Exit(2)
	}
	if *cacheDir == "" {
		if *cacheDir, err = e2ebinary.DefaultCacheDir(); err != nil {
			fmt.Fprintln(os.Stderr, "builde2e:", err)
			os.Exit(1)
		}
	}
	if *pathOnly {
		fmt.Println(e2ebinary.Path(*cacheDir, r))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := e2ebinary.Build(ctx, e2ebinary.Options{Release: r, CacheDir: *cacheDir, ModuleDir: *module,
		Logger: textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stderr)))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "builde2e:", err)
		os.Exit(1)
	}
	if !bin.Built {
		fmt.Fprintf(os.Stderr, "builde2e: e2e.test %s is current: %s\n", r, bin.Path)
	}
	fmt.Println(bin.Path)
}
