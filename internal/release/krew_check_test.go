package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"
)

// checkKrew checks the krew manifest of a release directory as krew reads
// it (unknown fields refused): the plugin csi-registrar at the release's
// version, one platform per architecture, each naming its archive in the
// directory by an https URI and by the archive's SHA-256, and each archive
// holding exactly the release's plugin binary for that architecture
// (executable) and the repository's license, which the manifest copies.
func checkKrew(t *testing.T, dir, version string) {
	t.Helper()
	path := filepath.Join(dir, KrewManifestName(version))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m KrewManifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if m.APIVersion != KrewAPIVersion || m.Kind != "Plugin" || m.Metadata.Name != "csi-registrar" {
		t.Errorf("%s: %s %s %q, want %s Plugin csi-registrar (kubectl runs kubectl-csi_registrar as kubectl csi-registrar)",
			path, m.APIVersion, m.Kind, m.Metadata.Name, KrewAPIVersion)
	}
	if m.Spec.Version != version || !semver.IsValid(m.Spec.Version) {
		t.Errorf("%s: version %q, want %s", path, m.Spec.Version, version)
	}
	if m.Spec.Homepage == "" || m.Spec.ShortDescription == "" || m.Spec.Description == "" || len(m.Spec.ShortDescription) > 50 {
		t.Errorf("%s: homepage %q, shortDescription %q, description %q: want all, the short one at most 50 characters",
			path, m.Spec.Homepage, m.Spec.ShortDescription, m.Spec.Description)
	}
	license, err := os.ReadFile(filepath.Join(repoRoot, LicenseFile))
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, p := range m.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		platforms = append(platforms, goos+"/"+arch)
		if len(p.Selector.MatchLabels) != 2 || goos != "linux" {
			t.Errorf("%s: platform selector %v, want os: linux and an arch", path, p.Selector.MatchLabels)
			continue
		}
		name := PluginArchiveName(version, arch)
		if u, err := url.Parse(p.URI); err != nil || u.Scheme != "https" || !strings.HasSuffix(u.Path, "/"+name) {
			t.Errorf("%s: %s uri %q, want an https URL of %s", path, arch, p.URI, name)
		}
		archive, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %s: %v", path, arch, err)
			continue
		}
		if p.SHA256 != sha256Hex(archive) {
			t.Errorf("%s: %s sha256 %s, but %s's is %s", path, arch, p.SHA256, name, sha256Hex(archive))
		}
		wantFiles := []KrewFile{{From: PluginBin, To: "."}, {From: LicenseFile, To: "."}}
		if p.Bin != PluginBin || !slices.Equal(p.Files, wantFiles) {
			t.Errorf("%s: %s bin %q files %+v, want bin %s and files %+v", path, arch, p.Bin, p.Files, PluginBin, wantFiles)
		}
		bin, err := os.ReadFile(filepath.Join(dir, PluginBinaryName(version, arch)))
		if err != nil {
			t.Fatal(err)
		}
		checkPluginArchive(t, name, archive, bin, license)
	}
	sort.Strings(platforms)
	// krew's arch label is the GOARCH (runtime.GOARCH of the kubectl
	// machine), with no variant.
	var want []string
	for _, p := range wantPlatforms {
		f := strings.Split(p, "/")
		want = append(want, f[0]+"/"+f[1])
	}
	if !slices.Equal(platforms, want) {
		t.Errorf("%s: platforms %v, want %v", path, platforms, want)
	}
}

// checkPluginArchive checks a plugin archive holds exactly PluginBin (the
// binary, executable) and LicenseFile (the license).
func checkPluginArchive(t *testing.T, name string, archive, bin, license []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("%s: not gzip: %v", name, err)
	}
	got := map[string][]byte{}
	walkTar(t, name, zr, func(h *tar.Header, body io.Reader) {
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h.Typeflag != tar.TypeReg || (h.Name == PluginBin && h.Mode&0o111 == 0) {
			t.Errorf("%s: %s is of type %c, mode %o: want regular files, %s executable", name, h.Name, h.Typeflag, h.Mode, PluginBin)
		}
		got[h.Name] = b
	})
	if len(got) != 2 || !bytes.Equal(got[PluginBin], bin) || !bytes.Equal(got[LicenseFile], license) {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		t.Errorf("%s holds %v: want exactly %s (the release's plugin binary) and %s (the repository's)", name, names, PluginBin, LicenseFile)
	}
}
