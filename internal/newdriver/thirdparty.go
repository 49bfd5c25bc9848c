package newdriver

import (
	"fmt"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// thirdPartyDir is where a project generated from a checkout keeps its copy
// of the csi-registrar packages it imports: a module of its own, which the
// project's go.mod replaces csi-registrar with by a relative path. The
// project then builds wherever it is copied, with no checkout; `make
// use-checkout` points the replace at a checkout instead, a release drops it.
const thirdPartyDir = "third_party/csi-registrar"

// thirdParty returns the copy of the csi-registrar packages that files (the
// project's Go files, tests included) import, directly or through each
// other: their non-test Go files as they are, csi-registrar's go.mod (its
// requirements are the versions those packages were tested with), and its
// LICENSE and a README saying what the copy is.
func (o Options) thirdParty(files []file, license []byte) ([]file, error) {
	var queue []string
	for _, f := range files {
		if strings.HasSuffix(f.path, ".go") {
			imps, err := moduleImports(f.path, f.data)
			if err != nil {
				return nil, err
			}
			queue = append(queue, imps...)
		}
	}
	seen := map[string]bool{}
	var out []file
	for len(queue) > 0 {
		imp := queue[0]
		queue = queue[1:]
		if seen[imp] {
			continue
		}
		seen[imp] = true
		rel := strings.TrimPrefix(strings.TrimPrefix(imp, ModulePath), "/")
		if rel == "" || slices.Contains(strings.Split(rel, "/"), "internal") {
			return nil, fmt.Errorf("the driver imports %s, which another module cannot import", imp)
		}
		dir := filepath.Join(o.Source.Dir, filepath.FromSlash(rel))
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("the driver imports %s: %w", imp, err)
		}
		n := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return nil, err
			}
			imps, err := moduleImports(path.Join(rel, name), b)
			if err != nil {
				return nil, err
			}
			queue = append(queue, imps...)
			out = append(out, file{path: path.Join(thirdPartyDir, rel, name), data: b, mode: 0o644})
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("the driver imports %s, which has no Go files in %s", imp, dir)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	goMod, err := os.ReadFile(filepath.Join(o.Source.Dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	pkgs := slices.Sorted(maps.Keys(seen))
	readme := fmt.Sprintf("# %s (a copy)\n\nThe packages of %s this project imports, copied by csi-driver-new from a\n"+
		"checkout of it (no release was tagged), under the Apache License 2.0 (LICENSE); `go.mod` is csi-registrar's.\n"+
		"The project's go.mod replaces the module with this directory; README.md, \"Moving to a release of\n"+
		"csi-registrar\", says how to leave it. Do not edit: changes belong in csi-registrar.\n\n- %s\n",
		ModulePath, ModulePath, strings.Join(pkgs, "\n- "))
	out = append(out,
		file{path: thirdPartyDir + "/go.mod", data: goMod, mode: 0o644},
		file{path: thirdPartyDir + "/LICENSE", data: license, mode: 0o644},
		file{path: thirdPartyDir + "/README.md", data: []byte(readme), mode: 0o644},
	)
	return out, nil
}

// moduleImports returns the import paths of csi-registrar packages in a Go
// file.
func moduleImports(name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			return nil, err
		}
		if p == ModulePath || strings.HasPrefix(p, ModulePath+"/") {
			out = append(out, p)
		}
	}
	return out, nil
}
