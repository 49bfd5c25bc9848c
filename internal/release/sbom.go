package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOMOptions say what the SBOM describes: the Go modules linked into the
// main package when built as the Makefile builds it, for every arch.
type SBOMOptions struct {
	// ModuleDir is the main module's directory (the repository root).
	ModuleDir string
	// MainPackage is the command, e.g. ./cmd/csi-registrar.
	MainPackage string
	// BuildTags are the build's -tags, comma-separated.
	BuildTags string
	// Version is the main module's version (the release version).
	Version string
	// Created is the SBOM's timestamp.
	Created time.Time
}

// Module is one Go module of the build.
type Module struct {
	Path    string
	Version string
}

// LinkedModules lists the modules whose packages `go build` links into
// opts.MainPackage for linux/arch with CGO_ENABLED=0 and opts.BuildTags
// (go list -deps: the module graph reduced to what is linked), the main
// module first, then by path. The standard library is left out.
func LinkedModules(opts SBOMOptions, arch string) ([]Module, string, error) {
	cmd := exec.Command("go", "list", "-deps", "-tags", opts.BuildTags, "-json=ImportPath,Standard,Module", opts.MainPackage)
	cmd.Dir = opts.ModuleDir
	p, err := PlatformOf(arch)
	if err != nil {
		return nil, "", err
	}
	cmd.Env = append(os.Environ(), p.Env()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go list -deps %s (linux/%s): %v: %s", opts.MainPackage, arch, err, strings.TrimSpace(stderr.String()))
	}
	type mod struct {
		Path    string
		Version string
		Main    bool
		Replace *mod
	}
	var main string
	seen := map[string]Module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Standard   bool
			Module     *mod
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, "", fmt.Errorf("go list output: %w", err)
		}
		if p.Standard || p.Module == nil {
			continue
		}
		m := *p.Module
		if m.Main {
			main = m.Path
			continue
		}
		v := m.Version
		if m.Replace != nil && m.Replace.Version != "" {
			v = m.Replace.Version
		}
		seen[m.Path] = Module{Path: m.Path, Version: v}
	}
	if main == "" {
		return nil, "", fmt.Errorf("go list -deps %s: no main module", opts.MainPackage)
	}
	mods := []Module{{Path: main, Version: opts.Version}}
	var deps []Module
	for _, m := range seen {
		deps = append(deps, m)
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	return append(mods, deps...), goVersion(opts.ModuleDir), nil
}

// goVersion is the toolchain's version, e.g. go1.26.8.
func goVersion(dir string) string {
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func purl(path, version string) string { return "pkg:golang/" + path + "@" + version }

// WriteSBOM writes a CycloneDX 1.6 JSON SBOM of the modules linked into
// opts.MainPackage for every arch of Archs (they must agree: the build is
// the same Go code for each) with the official CycloneDX Go library: the
// main module as metadata.component, every other module and the standard
// library as components it depends on, each with its package URL.
func WriteSBOM(w io.Writer, opts SBOMOptions) error {
	var mods []Module
	var gover string
	for i, arch := range Archs() {
		m, gv, err := LinkedModules(opts, arch)
		if err != nil {
			return err
		}
		if i > 0 && fmt.Sprint(m) != fmt.Sprint(mods) {
			return fmt.Errorf("linux/%s links other modules than linux/%s: %v vs %v", arch, Archs()[0], m, mods)
		}
		mods, gover = m, gv
	}
	main := mods[0]
	root := cdx.Component{
		BOMRef:     purl(main.Path, main.Version),
		Type:       cdx.ComponentTypeApplication,
		Name:       main.Path,
		Version:    main.Version,
		PackageURL: purl(main.Path, main.Version),
		Licenses:   &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
	}
	var comps []cdx.Component
	var refs []string
	add := func(c cdx.Component) {
		comps = append(comps, c)
		refs = append(refs, c.BOMRef)
	}
	for _, m := range mods[1:] {
		add(cdx.Component{
			BOMRef: purl(m.Path, m.Version), Type: cdx.ComponentTypeLibrary, Scope: cdx.ScopeRequired,
			Name: m.Path, Version: m.Version, PackageURL: purl(m.Path, m.Version),
		})
	}
	if gover != "" {
		add(cdx.Component{
			BOMRef: purl("std", gover), Type: cdx.ComponentTypeLibrary, Scope: cdx.ScopeRequired,
			Name: "std", Version: gover, PackageURL: purl("std", gover),
			Description: "the Go standard library and runtime",
		})
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: opts.Created.UTC().Format(time.RFC3339),
		Component: &root,
		Properties: &[]cdx.Property{
			{Name: "csi-registrar:build:platforms", Value: platformList()},
			{Name: "csi-registrar:build:tags", Value: opts.BuildTags},
			{Name: "csi-registrar:build:cgo", Value: "0"},
		},
	}
	bom.Components = &comps
	bom.Dependencies = &[]cdx.Dependency{{Ref: root.BOMRef, Dependencies: &refs}}
	enc := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	return enc.EncodeVersion(bom, cdx.SpecVersion1_6)
}

// platformList is the release's platforms, comma-separated: linux/amd64,linux/arm/v7,...
func platformList() string {
	var l []string
	for _, p := range Platforms() {
		l = append(l, p.String())
	}
	return strings.Join(l, ",")
}
