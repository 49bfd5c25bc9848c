// Command csi-driver-new writes a new CSI node driver project from
// csi-registrar's reference driver (stubdriver): the driver's Go code renamed
// into your module and package, a main package, the tests (csi-sanity
// included), a Dockerfile, kustomize manifests (the csi-registrar sidecar
// variant and the in-process one), a Makefile, a README and a CI workflow.
//
//	go run github.com/csi-registrar/csi-registrar/cmd/csi-driver-new@<tag> \
//	    -module example.com/mydriver -driver my.csi.example.com -dir ../mydriver
//
// From a checkout: make new-driver MODULE=... DRIVER=... DIR=... (which passes
// -from with the checkout). Bad input is refused before anything is written,
// with exit code 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/newdriver"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("csi-driver-new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o newdriver.Options
	fs.StringVar(&o.Module, "module", "", "the new project's Go module path, e.g. example.com/mydriver (required)")
	fs.StringVar(&o.Driver, "driver", "", "the CSI driver name, e.g. my.csi.example.com (required)")
	fs.StringVar(&o.Dir, "dir", "", "the directory to write the project to: new or empty (required)")
	fs.StringVar(&o.Package, "package", "", "the driver's Go package name (default: the module path's last element, letters and digits)")
	fs.StringVar(&o.KubeletDir, "kubelet-dir", csiplugin.DefaultKubeletDir, "the kubelet's root directory the manifests use")
	from := fs.String("from", "", "a csi-registrar checkout to generate from, which go.mod then replaces the module with "+
		"(default: the released module this command was run as, with go run ...@<tag>)")
	tidy := fs.Bool("tidy", true, "run go mod tidy in the new project")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "csi-driver-new: unexpected argument %q: every setting is a flag (-help lists them)\n", fs.Arg(0))
		return 2
	}
	code, err := generate(ctx, o, *from, *tidy, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "csi-driver-new:", err)
		if csiplugin.IsValidationError(err) {
			fmt.Fprintln(stderr, "csi-driver-new: nothing was written")
		}
	}
	return code
}

// generate writes the project and returns the exit code and the error that
// made it fail: a bad value is a *csiplugin.ValidationError (exit 2).
func generate(ctx context.Context, o newdriver.Options, from string, tidy bool, stdout io.Writer) (int, error) {
	src, err := source(ctx, from)
	if err != nil {
		return 2, err
	}
	o.Source = src
	res, err := newdriver.Generate(ctx, o, tidy)
	if err != nil {
		if csiplugin.IsValidationError(err) {
			return 2, err
		}
		return 1, err
	}
	fmt.Fprintf(stdout, "wrote %d files to %s: package %s (pkg/%s), command %s (cmd/%s)\n",
		len(res.Files), res.Dir, res.Package, res.Package, res.Binary, res.Binary)
	fmt.Fprintf(stdout, "next: cd %s && make build test   (README.md: verify on a cluster)\n", res.Dir)
	return 0, nil
}

// source is the csi-registrar module to generate from: the checkout -from
// names; else the version this command was built at (go run ...@<tag>);
// else the checkout the current directory is in.
func source(ctx context.Context, from string) (newdriver.Source, error) {
	if from != "" {
		return newdriver.CheckoutSource(from)
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == newdriver.ModulePath &&
		bi.Main.Version != "" && bi.Main.Version != "(devel)" && !strings.HasSuffix(bi.Main.Version, "+dirty") {
		return newdriver.ReleasedSource(ctx, bi.Main.Version)
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err == nil && gomod != "" && gomod != os.DevNull {
		if s, err := newdriver.CheckoutSource(filepath.Dir(gomod)); err == nil {
			return s, nil
		}
	}
	return newdriver.Source{}, errors.New("no csi-registrar source: run it as go run " + newdriver.ModulePath +
		"/cmd/csi-driver-new@<tag>, or from a checkout (make new-driver, or -from <checkout>)")
}
