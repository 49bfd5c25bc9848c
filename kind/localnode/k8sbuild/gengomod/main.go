// Command gengomod writes the nested module of kind/localnode/k8sbuild for
// one Kubernetes release (gen-gomod.sh runs it): go.mod, go.sum and tools.go
// in the folder named after the release's minor version (1.37/ for v1.37.2),
// from which kind/localnode/build.sh builds the local node's Kubernetes and
// kind/storage/build-e2e.sh the storage e2e test binary.
//
// The go.mod is internal/e2ebinary's ModuleFile: k8s.io/kubernetes's
// ./staging replacements mirrored with the published staging modules, the
// rule `kubectl csi-registrar storage-e2e` builds with too.
//
// A tools.go equal to tools.go.in beside the release folders becomes a
// relative symlink to it, so that the releases pinning the same commands
// share one list of them.
//
//	go run ./kind/localnode/k8sbuild/gengomod [-dir kind/localnode/k8sbuild] v1.37.2
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"

	"github.com/csi-registrar/csi-registrar/internal/e2ebinary"
)

// modulePrefix is the path of the nested modules, without the minor version.
const modulePrefix = "github.com/csi-registrar/csi-registrar/kind/localnode/k8sbuild/"

// etcdPackage is etcd's main package, the root of its server module. Every
// release of k8s.io/kubernetes requires that module (its integration tests
// embed etcd), so the nested module builds the local node's etcd at the
// version the release pins, from the module proxy like the rest.
const etcdPackage = "go.etcd.io/etcd/server/v3"

// commands are the packages every nested module pins: Kubernetes' commands
// and etcd.
func commands() []string {
	var p []string
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubeadm", "kubectl", "kubelet"} {
		p = append(p, e2ebinary.KubernetesModule+"/cmd/"+c)
	}
	return append(p, etcdPackage)
}

// Module is the nested module of release r.
func Module(r e2ebinary.Release, withE2E bool) e2ebinary.Module {
	pkgs := commands()
	if withE2E {
		pkgs = append(pkgs, e2ebinary.E2EPackage)
	}
	return e2ebinary.Module{
		Path:     modulePrefix + r.MinorString(),
		Comment:  "Nested module that builds Kubernetes " + r.MinorString() + " binaries; regenerate with ../gen-gomod.sh.",
		Release:  r,
		Packages: pkgs,
		Doc: []string{
			"Package k8sbuild only pins the Kubernetes packages this module builds",
			"(kubeadm and kube-proxy for the kind node image: build.sh --with-kind;",
			"test/e2e for the storage e2e test binary: kind/storage/build-e2e.sh)",
			"and etcd's server at the version Kubernetes pins (build.sh).",
		},
	}
}

func main() {
	dir := flag.String("dir", "kind/localnode/k8sbuild", "the directory of the nested modules")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gengomod [-dir DIR] v1.MINOR.PATCH\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	r, err := e2ebinary.ParseRelease(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gengomod:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := generate(ctx, filepath.Join(*dir, r.MinorString()), r); err != nil {
		fmt.Fprintln(os.Stderr, "gengomod:", err)
		os.Exit(1)
	}
}

func generate(ctx context.Context, out string, r e2ebinary.Release) error {
	// WriteModule would otherwise write through a symlinked tools.go into
	// the shared tools.go.in.
	if err := os.Remove(filepath.Join(out, "tools.go")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	info, err := e2ebinary.LookUp(ctx, "go", r)
	if err != nil {
		return err
	}
	m := Module(r, true)
	err = e2ebinary.WriteModule(ctx, "go", out, m, info)
	var ge *e2ebinary.GoError
	if errors.As(err, &ge) {
		// 1.34.x: k8s.io/sample-apiserver v0.34.x, which test/e2e imports,
		// is not on the module proxy.
		fmt.Fprintf(os.Stderr, "k8sbuild: %s of %s does not resolve through the module proxy: tools.go pins the commands only (no make e2e-storage on %s)\n%v\n",
			e2ebinary.E2EPackage, r, r.MinorString(), err)
		m = Module(r, false)
		err = e2ebinary.WriteModule(ctx, "go", out, m, info)
	}
	if err != nil {
		return err
	}
	if err := shareTools(out); err != nil {
		return err
	}
	fmt.Printf("k8sbuild: %s/go.mod now requires %s %s (tools.go pins %d packages: %v)\n", r.MinorString(), e2ebinary.KubernetesModule, r,
		len(m.Packages), slices.Sorted(slices.Values(m.Packages)))
	return nil
}

// sharedTools is the list of commands most releases pin, in the folder above
// the release folders.
const sharedTools = "tools.go.in"

// shareTools replaces out's tools.go with a relative symlink to
// ../tools.go.in when the two hold the same bytes. A release whose list
// differs (1.34 pins no e2e package) keeps its own file.
func shareTools(out string) error {
	file := filepath.Join(out, "tools.go")
	got, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	want, err := os.ReadFile(filepath.Join(filepath.Dir(out), sharedTools))
	if errors.Is(err, os.ErrNotExist) || (err == nil && !bytes.Equal(got, want)) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(file); err != nil {
		return err
	}
	return os.Symlink(filepath.Join("..", sharedTools), file)
}
