// Package release assembles the artifacts of a csi-registrar release in one
// directory (`make release VERSION=vX.Y.Z`, bin/release/): from the static
// binaries the Makefile built, one multi-architecture OCI image (an image
// index) as an OCI archive, its digest, a CycloneDX SBOM of the Go modules
// linked into the binaries, the kubectl plugin's archives with their krew
// manifest, and SHA256SUMS over every artifact.
// It writes the OCI layout itself, deterministically, so that a release
// needs no container tool on the machine.
package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/mod/semver"
)

// Platform is one Linux platform of a release.
type Platform struct {
	// GOARCH is Go's name of the architecture, also the OCI architecture,
	// krew's arch label and the end of the release files' names
	// (-linux-GOARCH).
	GOARCH string
	// GOARM is the ARM architecture version built for, GOARCH arm only:
	// 7, Go's default and what node-driver-registrar's arm images run on.
	GOARM string
	// Variant is the OCI platform variant: v7 for arm, v8 for arm64 (as
	// the registries' official images say), none for the others.
	Variant string
}

// Env is the build environment of p: what `go build` and `go list` need
// in their environment to build for p, statically.
func (p Platform) Env() []string {
	env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + p.GOARCH}
	if p.GOARM != "" {
		env = append(env, "GOARM="+p.GOARM)
	}
	return env
}

// String is the platform as an OCI platform string: linux/arm/v7.
func (p Platform) String() string {
	s := "linux/" + p.GOARCH
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Platforms are the platforms of a release: the Linux platforms
// node-driver-registrar's images cover (amd64, arm/v7, arm64, ppc64le,
// s390x), in that order.
func Platforms() []Platform {
	return []Platform{
		{GOARCH: "amd64"},
		{GOARCH: "arm", GOARM: "7", Variant: "v7"},
		{GOARCH: "arm64", Variant: "v8"},
		{GOARCH: "ppc64le"},
		{GOARCH: "s390x"},
	}
}

// Archs are the GOARCH of Platforms, in the same order.
func Archs() []string {
	var a []string
	for _, p := range Platforms() {
		a = append(a, p.GOARCH)
	}
	return a
}

// PlatformOf is the platform of the release whose GOARCH is arch.
func PlatformOf(arch string) (Platform, error) {
	for _, p := range Platforms() {
		if p.GOARCH == arch {
			return p, nil
		}
	}
	return Platform{}, fmt.Errorf("architecture %q: a release has linux %s", arch, strings.Join(Archs(), ", "))
}

// SumsFile is the name of the checksum file, in `sha256sum -c` format.
const SumsFile = "SHA256SUMS"

// BinaryName is the file name of the release binary for arch.
func BinaryName(version, arch string) string {
	return fmt.Sprintf("csi-registrar-%s-linux-%s", version, arch)
}

// PluginBinaryName is the file name of the kubectl plugin's release binary
// for arch (cmd/kubectl-csi_registrar). It ships beside the image's binary,
// never in the image; a user copies it onto PATH as kubectl-csi_registrar.
func PluginBinaryName(version, arch string) string {
	return fmt.Sprintf("kubectl-csi_registrar-%s-linux-%s", version, arch)
}

// ArchiveName is the file name of the OCI archive (the multi-arch image).
func ArchiveName(version string) string { return "csi-registrar-" + version + ".oci.tar" }

// DigestName is the file name holding the image index's digest.
func DigestName(version string) string { return "csi-registrar-" + version + ".oci.digest" }

// SBOMName is the file name of the CycloneDX SBOM.
func SBOMName(version string) string { return "csi-registrar-" + version + ".cdx.json" }

// Options are the inputs of Assemble.
type Options struct {
	// Dir holds BinaryName(Version, arch) and PluginBinaryName(Version,
	// arch) for every arch of Archs (Build writes them); the
	// archive, its digest and SumsFile are written there.
	Dir string
	// Version is the release's version: a semantic version with a leading v
	// (vX.Y.Z or vX.Y.Z-pre), which is also the image's tag.
	Version string
	// Created is the image's creation time, e.g. the commit's time.
	Created time.Time
	// Revision is the source commit; optional.
	Revision string
	// ModuleDir, MainPackage and BuildTags say how the binaries were built:
	// the SBOM lists the modules linked into MainPackage with BuildTags.
	// ModuleDir also holds LicenseFile, shipped in the plugin's archives.
	ModuleDir, MainPackage, BuildTags string
	// DownloadURL is where the release's files will be downloaded from,
	// ending in "/": the krew manifest's URIs start with it. Empty:
	// DefaultDownloadURL(Version).
	DownloadURL string
}

// Result is what Assemble wrote.
type Result struct {
	Archive string        // path of the OCI archive
	Index   v1.Descriptor // the image index: its digest is the image's
	Files   []string      // every file SumsFile lists, by name
}

// ErrBadInput marks errors in Options: the caller exits 2.
var ErrBadInput = errors.New("bad input")

// CheckVersion reports whether v can be a release version: a canonical
// semantic version with a leading v, pre-release allowed, no build metadata
// (a "+" is not allowed in an image tag).
func CheckVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return fmt.Errorf("%w: VERSION=%q is not a release version: want vMAJOR.MINOR.PATCH, optionally -PRERELEASE (e.g. v0.1.0, v0.2.0-rc.1), as git tags name releases", ErrBadInput, v)
	}
	return nil
}

// Assemble writes the OCI archive of the binaries in opts.Dir, its digest
// file, the SBOM, the kubectl plugin's archives and krew manifest, and SumsFile over every regular file in opts.Dir (which
// must hold nothing but the release's artifacts).
func Assemble(opts Options) (Result, error) {
	if err := CheckVersion(opts.Version); err != nil {
		return Result{}, err
	}
	if opts.MainPackage == "" {
		return Result{}, fmt.Errorf("%w: no main package (e.g. ./cmd/csi-registrar) for the SBOM", ErrBadInput)
	}
	if opts.Created.IsZero() {
		return Result{}, fmt.Errorf("%w: no creation time: pass the commit's time (git log -1 --format=%%ct)", ErrBadInput)
	}
	downloadURL := opts.DownloadURL
	if downloadURL == "" {
		downloadURL = DefaultDownloadURL(opts.Version)
	}
	if u, err := url.Parse(downloadURL); err != nil || u.Scheme != "https" || u.Host == "" || !strings.HasSuffix(u.Path, "/") {
		return Result{}, fmt.Errorf("%w: download URL %q: want an https URL of a directory, ending in /", ErrBadInput, downloadURL)
	}
	var images []Image
	for _, arch := range Archs() {
		p := filepath.Join(opts.Dir, BinaryName(opts.Version, arch))
		bin, err := os.ReadFile(p)
		if err != nil {
			return Result{}, fmt.Errorf("%w: the linux/%s binary: %v (make release builds it first)", ErrBadInput, arch, err)
		}
		images = append(images, Image{Arch: arch, Binary: bin})
		if _, err := os.Stat(filepath.Join(opts.Dir, PluginBinaryName(opts.Version, arch))); err != nil {
			return Result{}, fmt.Errorf("%w: the kubectl plugin's linux/%s binary: %v (make release builds it first)", ErrBadInput, arch, err)
		}
	}
	var archive bytes.Buffer
	idx, err := WriteOCIArchive(&archive, ImageOptions{Version: opts.Version, Created: opts.Created, Revision: opts.Revision}, images)
	if err != nil {
		return Result{}, err
	}
	res := Result{Archive: filepath.Join(opts.Dir, ArchiveName(opts.Version)), Index: idx}
	if err := os.WriteFile(res.Archive, archive.Bytes(), 0o644); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, DigestName(opts.Version)), []byte(idx.Digest.String()+"\n"), 0o644); err != nil {
		return Result{}, err
	}
	var sbom bytes.Buffer
	if err := WriteSBOM(&sbom, SBOMOptions{
		ModuleDir: opts.ModuleDir, MainPackage: opts.MainPackage, BuildTags: opts.BuildTags,
		Version: opts.Version, Created: opts.Created,
	}); err != nil {
		return Result{}, fmt.Errorf("SBOM: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, SBOMName(opts.Version)), sbom.Bytes(), 0o644); err != nil {
		return Result{}, err
	}
	license, err := os.ReadFile(filepath.Join(opts.ModuleDir, LicenseFile))
	if err != nil {
		return Result{}, fmt.Errorf("the license for the plugin's archives: %w", err)
	}
	if err := writeKrew(opts.Dir, opts.Version, downloadURL, license, opts.Created); err != nil {
		return Result{}, err
	}
	res.Files, err = WriteSums(opts.Dir)
	return res, err
}

// WriteSums writes dir/SumsFile: the SHA-256 of every other regular file in
// dir, sorted by name, in the format `sha256sum -c` reads. It returns the
// names listed.
func WriteSums(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	var out strings.Builder
	for _, e := range entries {
		if e.Name() == SumsFile {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file; the release directory holds only the artifacts", filepath.Join(dir, e.Name()))
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		content, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(content)
		fmt.Fprintf(&out, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	return names, os.WriteFile(filepath.Join(dir, SumsFile), []byte(out.String()), 0o644)
}
