package newdriver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// ModulePath is the csi-registrar module, which generated projects require.
const ModulePath = "github.com/csi-registrar/csi-registrar"

// checkoutVersion is the version a project generated from a checkout
// requires: a placeholder that go.mod's replace directive resolves.
const checkoutVersion = "v0.0.0-00010101000000-000000000000"

// Source is the csi-registrar module a project is generated from.
type Source struct {
	// Dir is the module's root directory: a checkout or the module cache.
	Dir string
	// Version is the module version the project requires. Empty: Dir is a
	// checkout, which the project's go.mod replaces the module with.
	Version string
}

// checkout reports whether the project must replace the module with Dir.
func (s Source) checkout() bool { return s.Version == "" }

// requiredVersion is the version of ModulePath in the project's go.mod.
func (s Source) requiredVersion() string {
	if s.checkout() {
		return checkoutVersion
	}
	return s.Version
}

// CheckoutSource returns the checkout of csi-registrar at dir (made
// absolute: the project's go.mod names it).
func CheckoutSource(dir string) (Source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, err
	}
	if _, err := readModule(abs); err != nil {
		return Source{}, err
	}
	return Source{Dir: abs}, nil
}

// ReleasedSource returns the module cache's copy of csi-registrar at
// version (downloaded if needed by `go mod download`, as `go run
// ...@version` did to build this command).
func ReleasedSource(ctx context.Context, version string) (Source, error) {
	if err := module.Check(ModulePath, version); err != nil {
		return Source{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", ModulePath+"@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Source{}, fmt.Errorf("go mod download %s@%s: %w: %s", ModulePath, version, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return Source{}, fmt.Errorf("go mod download %s@%s: %w", ModulePath, version, err)
	}
	if m.Error != "" || m.Dir == "" {
		return Source{}, fmt.Errorf("go mod download %s@%s: %s", ModulePath, version, m.Error)
	}
	return Source{Dir: m.Dir, Version: version}, nil
}

// readModule parses dir's go.mod and checks that it is csi-registrar's.
func readModule(dir string) (*modfile.File, error) {
	p := filepath.Join(dir, "go.mod")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s is not a checkout of %s: %w", dir, ModulePath, err)
	}
	f, err := modfile.ParseLax(p, b, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil || f.Module.Mod.Path != ModulePath {
		return nil, fmt.Errorf("%s is not a checkout of %s: its go.mod declares another module", dir, ModulePath)
	}
	return f, nil
}

// file is one file of the project: its slash-separated path below the
// project's directory and its contents.
type file struct {
	path string
	data []byte
	mode os.FileMode
}

// sourceFiles are what the project takes from the source module as they
// are: the reference driver's Go files and its test-driver definition of
// the storage suite (both renamed later), its go.sum (the versions
// csi-registrar was tested with) and the license.
type sourceFiles struct {
	driver    []file // stubdriver/*.go but guide_test.go, named by base name
	storage   []byte // StorageDefinition
	goSum     []byte
	license   []byte
	base      map[string][]byte // manifests/base's files, by name
	goVersion string            // the go directive of csi-registrar's go.mod
}

// StorageDefinition is the reference driver's test-driver definition of
// Kubernetes' External storage e2e tests, in the source module; the
// project's test/storage-e2e.yaml is it renamed.
const StorageDefinition = "manifests/examples/storage-e2e/stub.csi.example.com.yaml"

// excludedDriverFile is stubdriver's one file that tests csi-registrar's
// repository (GUIDE.md), not the driver.
const excludedDriverFile = "guide_test.go"

func readSource(s Source) (*sourceFiles, error) {
	mf, err := readModule(s.Dir)
	if err != nil {
		return nil, err
	}
	sf := &sourceFiles{goVersion: "1.26.0"}
	if mf.Go != nil {
		sf.goVersion = mf.Go.Version
	}
	names, err := filepath.Glob(filepath.Join(s.Dir, "stubdriver", "*.go"))
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := filepath.Base(n)
		if base == excludedDriverFile {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		sf.driver = append(sf.driver, file{path: base, data: b, mode: 0o644})
	}
	if len(sf.driver) == 0 || !hasFile(sf.driver, "driver.go") {
		return nil, fmt.Errorf("%s has no stubdriver/driver.go: not a csi-registrar source tree", s.Dir)
	}
	if sf.storage, err = os.ReadFile(filepath.Join(s.Dir, filepath.FromSlash(StorageDefinition))); err != nil {
		return nil, err
	}
	if sf.base, err = readBase(s.Dir); err != nil {
		return nil, err
	}
	if sf.goSum, err = os.ReadFile(filepath.Join(s.Dir, "go.sum")); err != nil {
		return nil, err
	}
	if sf.license, err = os.ReadFile(filepath.Join(s.Dir, "LICENSE")); err != nil {
		return nil, err
	}
	if !strings.Contains(string(sf.license), "Apache License") {
		return nil, fmt.Errorf("%s/LICENSE is not the Apache License", s.Dir)
	}
	return sf, nil
}

// readBase reads the YAML files of manifests/base in dir.
func readBase(dir string) (map[string][]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(baseDir), "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no %s/*.yaml: not a csi-registrar source tree", dir, baseDir)
	}
	base := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		base[filepath.Base(n)] = b
	}
	return base, nil
}

func hasFile(files []file, name string) bool {
	for _, f := range files {
		if f.path == name {
			return true
		}
	}
	return false
}
