package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"golang.org/x/mod/modfile"
)

// This file is the release checker: it inspects a release directory with
// tools that did not write it — `sha256sum -c`, debug/elf and debug/buildinfo,
// and go-containerregistry (crane's library), which reads the OCI layout and
// validates every digest, size and diff_id — and is run both by `make test`
// (TestAssembleFromFakeBinaries) and by `make release` on its own output
// (TestReleaseDir).

// repoRoot is the main module's directory.
const repoRoot = "../.."

// wantPlatforms are the image index's platforms, and krew's: the Linux
// platforms of node-driver-registrar's images.
var wantPlatforms = []string{"linux/amd64", "linux/arm/v7", "linux/arm64/v8", "linux/ppc64le", "linux/s390x"}

// testOnlyModules must not be linked into the binary (and so not in its SBOM).
var testOnlyModules = []string{
	"k8s.io/client-go", "helm.sh/helm/v3", "sigs.k8s.io/kustomize/api",
	"github.com/google/go-containerregistry", "github.com/onsi/ginkgo/v2", "sigs.k8s.io/kind",
}

// makefileBuildTags are the -tags of the Makefile's GOBUILD.
func makefileBuildTags(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOBUILD\s*:=.* -tags ([A-Za-z0-9_,]+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no GOBUILD line with -tags")
	}
	return string(m[1])
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkRelease checks a release directory. real: the binaries are the real
// ones (static Go programs built by `make release`), not fakes.
func checkRelease(t *testing.T, dir, version string, real bool) {
	t.Helper()
	want := []string{ArchiveName(version), DigestName(version), SBOMName(version), KrewManifestName(version)}
	if !slices.Equal(Archs(), []string{"amd64", "arm", "arm64", "ppc64le", "s390x"}) {
		t.Errorf("the release's architectures are %v, want linux amd64, arm, arm64, ppc64le and s390x", Archs())
	}
	for _, a := range Archs() {
		want = append(want, BinaryName(version, a), PluginBinaryName(version, a), PluginArchiveName(version, a))
	}
	sort.Strings(want)
	checkSums(t, dir, want)
	binaries := map[string][]byte{}
	for _, arch := range Archs() {
		p := filepath.Join(dir, BinaryName(version, arch))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		binaries[arch] = b
		checkELF(t, p, b, arch, real)
		if real {
			checkBuildInfo(t, p, arch, version)
		}
		// The kubectl plugin: the same build, its own binary, not in the image.
		pp := filepath.Join(dir, PluginBinaryName(version, arch))
		pb, err := os.ReadFile(pp)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(pb, b) {
			t.Errorf("%s is the image's binary", pp)
		}
		checkELF(t, pp, pb, arch, real)
		if real {
			checkPluginBuildInfo(t, pp, arch, version)
		}
	}
	digest, err := os.ReadFile(filepath.Join(dir, DigestName(version)))
	if err != nil {
		t.Fatal(err)
	}
	checkArchive(t, filepath.Join(dir, ArchiveName(version)), version, strings.TrimSpace(string(digest)), binaries)
	checkSBOM(t, filepath.Join(dir, SBOMName(version)), version, real, filepath.Join(dir, BinaryName(version, Archs()[0])))
	checkKrew(t, dir, version)
}

// checkSums runs `sha256sum -c` on SHA256SUMS and checks it lists exactly want.
func checkSums(t *testing.T, dir string, want []string) {
	t.Helper()
	cmd := exec.Command("sha256sum", "--check", "--strict", SumsFile)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sha256sum -c %s in %s: %v\n%s", SumsFile, dir, err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		_, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("%s: line %q is not `<sha256>  <name>`", SumsFile, line)
		}
		listed = append(listed, name)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("%s lists %v, want %v", SumsFile, listed, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want)+1 {
		t.Errorf("%s holds %d files, want the %d artifacts and %s", dir, len(entries), len(want), SumsFile)
	}
}

// checkELF checks the ELF machine and, for a real binary, that it is static
// (no program interpreter, no shared library).
func checkELF(t *testing.T, what string, b []byte, arch string, real bool) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: not an ELF file: %v", what, err)
	}
	defer f.Close()
	want, ok := platformtest.ELFOf(arch)
	if !ok {
		t.Fatalf("%s: no ELF expectation for architecture %q", what, arch)
	}
	if f.Machine != want.Machine || f.Class != want.Class || f.Data != want.Data {
		t.Errorf("%s: ELF %v %v %v, want %v %v %v for %s", what, f.Machine, f.Class, f.Data, want.Machine, want.Class, want.Data, arch)
	}
	if !real {
		return
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has a program interpreter: not static", what)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: links shared libraries %v", what, libs)
	}
}

// checkBuildInfo checks the real binary was built as `make build` builds.
func checkBuildInfo(t *testing.T, path, arch, version string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{
		"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch, "-trimpath": "true", "-tags": makefileBuildTags(t),
	}
	if arch == "arm" {
		want["GOARM"] = "7" // ARMv7, as node-driver-registrar's arm images
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("%s: build setting %s=%q, want %q", path, k, settings[k], v)
		}
	}
	// -trimpath keeps -ldflags out of the build info: ask the binary where
	// it runs here, else look for the version string -X put in it.
	if arch == runtime.GOARCH {
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "csi-registrar "+version {
			t.Errorf("%s --version: %q, %v; want csi-registrar %s", path, out, err, version)
		}
	} else if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte(version)) {
		t.Errorf("%s: does not contain its version %s (-X main.version): %v", path, version, err)
	}
}

// checkPluginBuildInfo checks the kubectl plugin was built as `make build`
// builds it, from cmd/kubectl-csi_registrar, and says its version.
func checkPluginBuildInfo(t *testing.T, path, arch, version string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !strings.HasSuffix(bi.Path, "/cmd/kubectl-csi_registrar") {
		t.Errorf("%s: built from %s, want cmd/kubectl-csi_registrar", path, bi.Path)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch, "-trimpath": "true"}
	if arch == "arm" {
		want["GOARM"] = "7"
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("%s: build setting %s=%q, want %q", path, k, settings[k], v)
		}
	}
	if arch == runtime.GOARCH {
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), version) {
			t.Errorf("%s --version: %q, %v; want it to name %s", path, out, err, version)
		}
	}
}

// extract unpacks a tar archive into dir (regular files and directories only).
func extract(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	walkTar(t, archive, f, func(h *tar.Header, body io.Reader) {
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("%s: entry %q leaves the archive", archive, h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: entry %q of type %c in an OCI layout", archive, h.Name, h.Typeflag)
		}
	})
}

// walkTar calls fn with each entry of the tar stream r and its contents;
// name says whose stream it is in errors.
func walkTar(t *testing.T, name string, r io.Reader, fn func(h *tar.Header, body io.Reader)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fn(h, tr)
	}
}

// checkArchive reads the OCI archive with go-containerregistry: one image
// index tagged version, digest as the digest file says, with one image per
// architecture whose config names that platform and whose one layer holds
// the architecture's binary as /csi-registrar and the symlink
// /csi-node-driver-registrar.
func checkArchive(t *testing.T, archive, version, digest string, binaries map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	extract(t, archive, dir)
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s: not an OCI layout: %v", archive, err)
	}
	if err := validate.Index(top); err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%s: index.json lists %d entries, want 1 (the image index)", archive, len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.MediaType != types.OCIImageIndex || d.Annotations[AnnotationRefName] != version || d.Digest.String() != digest {
		t.Errorf("%s: index.json entry %s %s tagged %q, want an image index %s tagged %s",
			archive, d.MediaType, d.Digest, d.Annotations[AnnotationRefName], digest, version)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, md := range m.Manifests {
		if md.Platform == nil {
			t.Fatalf("%s: manifest %s has no platform", archive, md.Digest)
		}
		arch := md.Platform.Architecture
		archs = append(archs, md.Platform.String())
		img, err := idx.Image(md.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != md.Platform.OS || cfg.Architecture != arch || cfg.Variant != md.Platform.Variant {
			t.Errorf("%s: config of the %s image says %s/%s/%s", archive, md.Platform, cfg.OS, cfg.Architecture, cfg.Variant)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{"/csi-registrar", "register"}) || cfg.Config.User != "0:0" {
			t.Errorf("%s: %s entrypoint %q user %q, want the Dockerfile's", archive, arch, cfg.Config.Entrypoint, cfg.Config.User)
		}
		if l := cfg.Config.Labels; l["org.opencontainers.image.version"] != version || l["org.opencontainers.image.licenses"] != "Apache-2.0" {
			t.Errorf("%s: %s labels %v", archive, arch, l)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %s image: %d layers, %v; want 1", archive, arch, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]*tar.Header{}
		var bin []byte
		walkTar(t, archive+" "+arch+" layer", rc, func(h *tar.Header, body io.Reader) {
			files[h.Name] = h
			if h.Name == "csi-registrar" {
				if bin, err = io.ReadAll(body); err != nil {
					t.Fatal(err)
				}
			}
		})
		rc.Close()
		reg, link := files["csi-registrar"], files["csi-node-driver-registrar"]
		if len(files) != 2 || reg == nil || link == nil || reg.Typeflag != tar.TypeReg || reg.Mode&0o111 == 0 ||
			link.Typeflag != tar.TypeSymlink || link.Linkname != "csi-registrar" {
			t.Errorf("%s: %s layer holds %v, want csi-registrar (executable) and the symlink csi-node-driver-registrar -> csi-registrar", archive, arch, files)
			continue
		}
		if want, ok := binaries[arch]; !ok || sha256Hex(bin) != sha256Hex(want) {
			t.Errorf("%s: the %s image's /csi-registrar is not the release's %s binary", archive, arch, arch)
		}
		checkELF(t, archive+" "+arch+" /csi-registrar", bin, arch, false)
	}
	sort.Strings(archs)
	if !slices.Equal(archs, wantPlatforms) {
		t.Errorf("%s: the image index holds %v, want %v", archive, archs, wantPlatforms)
	}
}

// checkSBOM checks the CycloneDX SBOM: the main module and release version,
// the modules of go.mod at go.mod's versions, no test-only module; for a real
// release, exactly the modules the binary's build info lists.
func checkSBOM(t *testing.T, path, version string, real bool, binary string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component struct{ Name, Version, Purl string }
		}
		Components []struct {
			Name, Version, Purl string
			Type                string
		}
		Dependencies []struct {
			Ref       string   `json:"ref"`
			DependsOn []string `json:"dependsOn"`
		}
	}
	if err := json.Unmarshal(b, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	mf, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := modfile.Parse("go.mod", mf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.6" || bom.Metadata.Component.Name != gomod.Module.Mod.Path ||
		bom.Metadata.Component.Version != version || bom.Metadata.Component.Purl != purl(gomod.Module.Mod.Path, version) {
		t.Errorf("%s: %s %s of %+v, want CycloneDX 1.6 of %s %s", path, bom.BOMFormat, bom.SpecVersion, bom.Metadata.Component, gomod.Module.Mod.Path, version)
	}
	required := map[string]string{}
	for _, r := range gomod.Require {
		required[r.Mod.Path] = r.Mod.Version
	}
	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
		if c.Name == "std" {
			continue
		}
		if c.Purl != purl(c.Name, c.Version) || required[c.Name] != c.Version {
			t.Errorf("%s: component %s %s (%s): go.mod requires %q", path, c.Name, c.Version, c.Purl, required[c.Name])
		}
	}
	for _, m := range []string{"google.golang.org/grpc", "github.com/container-storage-interface/spec", "k8s.io/kubelet", "std"} {
		if listed[m] == "" {
			t.Errorf("%s: does not list %s, which the binary links", path, m)
		}
	}
	for _, m := range testOnlyModules {
		if _, ok := listed[m]; ok {
			t.Errorf("%s: lists %s, which only tests use", path, m)
		}
	}
	if len(bom.Dependencies) != 1 || len(bom.Dependencies[0].DependsOn) != len(bom.Components) {
		t.Errorf("%s: dependencies %+v: want the main module depending on every component", path, bom.Dependencies)
	}
	if !real {
		return
	}
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	inBinary := map[string]string{"std": bi.GoVersion}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		inBinary[d.Path] = v
	}
	if fmt.Sprint(inBinary) != fmt.Sprint(listed) {
		t.Errorf("%s lists %v\nthe binary %s was built from %v", path, listed, binary, inBinary)
	}
}
