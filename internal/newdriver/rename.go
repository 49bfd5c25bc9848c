package newdriver

import (
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"path"
	"strings"
)

// The names in the reference driver's files that the rename changes.
const (
	stubImportPath = ModulePath + "/stubdriver"
	stubPackage    = "stubdriver"
	stubName       = "stub.csi.example.com"
	stubStateDir   = "/var/lib/csi-registrar/"
)

// renamer returns the mechanical rename of the reference driver's names
// into the project's: the import path, the package name (also in
// stubdriver_test and in comments), the driver name (also in the topology
// keys topology.<name>/...) and the state directory's parent. One pass: a
// replaced text is not replaced again.
func (o Options) renamer() *strings.Replacer {
	pkg := o.packageName()
	return strings.NewReplacer(
		stubImportPath, o.Module+"/pkg/"+pkg,
		"./"+stubPackage, "./pkg/"+pkg,
		"GUIDE.md next to this file", "csi-registrar's stubdriver/GUIDE.md",
		stubPackage, pkg,
		stubName, o.Driver,
		stubStateDir, "/var/lib/"+o.Binary()+"/",
	)
}

// header is put on top of each Go file taken from the reference driver:
// the Apache License 2.0 asks that a changed file say so. A blank line
// separates it from the package documentation.
func header(from string, s Source) string {
	version := s.Version
	if s.checkout() {
		version = "a checkout of it"
	}
	return fmt.Sprintf(`// Derived from %s of %s
// (%s), licensed under the Apache License, Version 2.0 (see LICENSE);
// renamed into this module by csi-driver-new.

`, from, ModulePath, version)
}

// renameDriver returns the reference driver's Go files renamed into the
// project's package, each with the header, formatted, and the rendered Go
// templates (the main package, written against stubdriver like the
// reference files) renamed the same way.
func (o Options) renameDriver(driver, rendered []file) ([]file, error) {
	r := o.renamer()
	pkgDir := "pkg/" + o.packageName() + "/"
	var out []file
	rename := func(from, to string, head string, data []byte) error {
		formatted, err := format.Source([]byte(head + r.Replace(string(data))))
		if err != nil {
			return fmt.Errorf("%s renamed as %s does not parse: %w", from, to, err)
		}
		out = append(out, file{path: to, data: formatted, mode: 0o644})
		return nil
	}
	for _, f := range driver {
		from := "stubdriver/" + f.path
		if err := rename(from, pkgDir+f.path, header(from, o.Source), f.data); err != nil {
			return nil, err
		}
	}
	for _, f := range rendered {
		if err := rename(f.path, f.path, "", f.data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkPackageName refuses a package name that the Go files (the reference
// driver's and the main package's) already use for something else, an
// import or an identifier: renamed, they would not compile, or would mean
// another thing.
func (o Options) checkPackageName(files []file) error {
	pkg := o.packageName()
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f.path, f.data, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		used := false
		for _, imp := range af.Imports {
			if imp.Name != nil && imp.Name.Name == pkg {
				used = true
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == pkg {
				used = true
			}
			return !used
		})
		if used {
			return bad("Go package name (-package, PACKAGE=)", pkg,
				"is already a name in the driver's "+f.path+" (an import or an identifier)",
				"give another package name with -package (PACKAGE=), e.g. "+pkg+"driver")
		}
	}
	return nil
}

// storageTarget is where the project keeps its test-driver definition.
const storageTarget = "test/storage-e2e.yaml"

// storageDefinition returns the project's test-driver definition: the
// reference driver's (def, StorageDefinition of the source) renamed, its
// opening comment, which is about csi-registrar's make targets, replaced
// by one about the project's.
func (o Options) storageDefinition(def []byte) (file, error) {
	lines := strings.SplitAfter(string(def), "\n")
	body := 0
	for body < len(lines) && strings.HasPrefix(lines[body], "#") {
		body++
	}
	rest := strings.Join(lines[body:], "")
	if !strings.Contains(rest, "Name: "+stubName+"\n") {
		return file{}, fmt.Errorf("%s of %s does not name %s: not the reference driver's definition", StorageDefinition, o.Source.Dir, stubName)
	}
	version := o.Source.Version
	if o.Source.checkout() {
		version = "a checkout of it"
	}
	head := fmt.Sprintf(`# Test-driver definition of %s for Kubernetes' External storage e2e tests
# (k8s.io/kubernetes/test/e2e/storage/external): make storage-e2e runs them with it on
# the current cluster, against the driver deployed there (make deploy), through
# kubectl csi-registrar storage-e2e --definition %s.
# Derived from the reference driver's definition in %s/ of
# %s (%s), renamed.
# The field names are the suite's (case-sensitive); claim only what the driver does,
# since every claim selects or enables specs.
`, o.Driver, storageTarget, path.Dir(StorageDefinition), ModulePath, version)
	return file{path: storageTarget, data: []byte(head + o.renamer().Replace(rest)), mode: 0o644}, nil
}
