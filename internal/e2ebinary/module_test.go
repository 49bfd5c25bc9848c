package e2ebinary

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

// k8sbuild is the directory of the local node's nested modules.
const k8sbuild = "../../kind/localnode/k8sbuild"

// committed returns the nested modules of kind/localnode/k8sbuild, parsed,
// by folder.
func committed(t *testing.T) map[string]*modfile.File {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(k8sbuild, "1.*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no nested module in %s: %v", k8sbuild, err)
	}
	mods := map[string]*modfile.File{}
	for _, d := range dirs {
		p := filepath.Join(d, "go.mod")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(p, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		mods[filepath.Base(d)] = f
	}
	return mods
}

func requiredRelease(t *testing.T, f *modfile.File) Release {
	t.Helper()
	for _, r := range f.Require {
		if r.Mod.Path == KubernetesModule {
			rel, err := ParseRelease(r.Mod.Version)
			if err != nil {
				t.Fatal(err)
			}
			return rel
		}
	}
	t.Fatalf("%s does not require %s", f.Module.Mod.Path, KubernetesModule)
	return Release{}
}

// TestModuleFileMatchesK8sbuild: for each release the local node builds,
// ModuleFile, given k8s.io/kubernetes's own go.mod of that release (from the
// module cache, else the module proxy), writes the go directive, godebug
// lines and replacements of the nested module committed for it, which
// build.sh builds Kubernetes from. So both builds resolve alike.
func TestModuleFileMatchesK8sbuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for minor, want := range committed(t) {
		t.Run(minor, func(t *testing.T) {
			r := requiredRelease(t, want)
			info, err := LookUp(ctx, "go", r)
			if err != nil {
				t.Fatal(err)
			}
			kgomod, err := os.ReadFile(info.GoMod)
			if err != nil {
				t.Fatal(err)
			}
			data, err := ModuleFile(Module{Path: "example.com/k8sbuild", Comment: "a comment", Release: r}, kgomod)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "// a comment\nmodule example.com/k8sbuild\n") {
				t.Errorf("go.mod does not start with the comment and the module:\n%s", data)
			}
			got, err := modfile.Parse("generated/go.mod", data, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if got.Go == nil || want.Go == nil || got.Go.Version != want.Go.Version {
				t.Errorf("go directive %v, want %v", got.Go, want.Go)
			}
			if g, w := godebugs(got), godebugs(want); !slices.Equal(g, w) {
				t.Errorf("godebug %v, want %v", g, w)
			}
			if g, w := replaces(got), replaces(want); !slices.Equal(g, w) {
				t.Errorf("replacements differ from %s/go.mod's:\n got %v\nwant %v", minor, g, w)
			}
			if len(got.Require) != 1 || got.Require[0].Mod.Path != KubernetesModule || got.Require[0].Mod.Version != r.String() {
				t.Errorf("requirements %v, want %s %s only", got.Require, KubernetesModule, r)
			}
		})
	}
}

func godebugs(f *modfile.File) []string {
	var s []string
	for _, g := range f.Godebug {
		s = append(s, g.Key+"="+g.Value)
	}
	return s
}

func replaces(f *modfile.File) []string {
	var s []string
	for _, r := range f.Replace {
		s = append(s, r.Old.String()+" => "+r.New.String())
	}
	slices.Sort(s)
	return s
}

// TestModuleFileRefuses: a go.mod that is not k8s.io/kubernetes's, or one
// without the ./staging replacements the rule mirrors, is refused rather
// than turned into a module that resolves the staging modules wrongly.
func TestModuleFileRefuses(t *testing.T) {
	r, _ := ParseRelease("v1.37.2")
	m := Module{Path: "example.com/k", Release: r}
	for name, tc := range map[string]struct{ gomod, want string }{
		"another module": {"module example.com/other\n\ngo 1.26.0\n", "another module's"},
		"no staging":     {"module k8s.io/kubernetes\n\ngo 1.26.0\n\nreplace k8s.io/api => k8s.io/api v0.37.2\n", "no module with a ./staging directory"},
		"not a go.mod":   {"module k8s.io/kubernetes\nrequire (\n", "go.mod"},
	} {
		if _, err := ModuleFile(m, []byte(tc.gomod)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestToolsFile: what WriteModule writes besides go.mod is gofmt'd Go,
// under the build tag tools, importing the packages sorted.
func TestToolsFile(t *testing.T) {
	got, err := ToolsFile(Module{Packages: []string{E2EPackage, KubernetesModule + "/cmd/kubelet"}, Doc: []string{"Package k8sbuild pins."}})
	if err != nil {
		t.Fatal(err)
	}
	want := "//go:build tools\n\n// Package k8sbuild pins.\npackage k8sbuild\n\nimport (\n" +
		"\t_ \"k8s.io/kubernetes/cmd/kubelet\"\n\t_ \"k8s.io/kubernetes/test/e2e\"\n)\n"
	if string(got) != want {
		t.Errorf("tools.go:\n%s\nwant:\n%s", got, want)
	}
}

// TestWriteModuleSharesVersions writes the module Build generates for the
// newest release the local node builds, as Build does (go mod tidy: the
// module cache, else the module proxy), and checks that every module it
// selects has the version the nested module selects: the e2e binary's
// packages are then in the Go build cache once the local node's Kubernetes
// was built, and the other way round.
func TestWriteModuleSharesVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go mod tidy of k8s.io/kubernetes/test/e2e")
	}
	mods := committed(t)
	var newest string
	for m := range mods {
		if newest == "" || requiredRelease(t, mods[m]).Minor > requiredRelease(t, mods[newest]).Minor {
			newest = m
		}
	}
	want := mods[newest]
	r := requiredRelease(t, want)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	info, err := LookUp(ctx, "go", r)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := time.Now()
	if err := WriteModule(ctx, "go", dir, Module{Path: "example.com/e2ebuild", Release: r, Packages: []string{E2EPackage}}, info); err != nil {
		t.Fatal(err)
	}
	t.Logf("module for %s written and tidied in %s", r, time.Since(start).Round(100*time.Millisecond))
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil || fi.Size() == 0 {
		t.Errorf("no go.sum written: %v", err)
	}
	versions := effective(want)
	shared := 0
	for p, v := range effective(got) {
		w, ok := versions[p]
		if !ok {
			t.Errorf("%s %s: not selected by %s/go.mod", p, v, newest)
			continue
		}
		if v != w {
			t.Errorf("%s: %s selected, %s/go.mod selects %s", p, v, newest, w)
		}
		shared++
	}
	t.Logf("%d modules selected, each at the version %s/go.mod selects", shared, newest)
}

// effective maps each module f requires to the version built: the
// replacement's when f replaces it (a staging module is required at
// v0.0.0 and replaced).
func effective(f *modfile.File) map[string]string {
	v := map[string]string{}
	for _, req := range f.Require {
		v[req.Mod.Path] = req.Mod.Version
	}
	for _, r := range f.Replace {
		if _, ok := v[r.Old.Path]; ok && r.Old.Version == "" {
			v[r.Old.Path] = r.New.Path + "@" + r.New.Version
			if r.New.Path == r.Old.Path {
				v[r.Old.Path] = r.New.Version
			}
		}
	}
	return v
}
