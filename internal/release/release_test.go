package release

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
)

// fakeELFHeaderOnly is a fake binary: the ELF header of a static Go binary
// for arch (its class, byte order and machine, platformtest.ELFOf) and nothing else
// runnable, followed by text saying so. It stands in for the real binaries
// in `make test`, where cross-compiling the real binaries for the five
// platforms would take minutes on a cold cache; `make release` runs the same
// checker on the real binaries (TestReleaseDir).
func fakeELFHeaderOnly(arch string) []byte {
	e, _ := platformtest.ELFOf(arch)
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(e.Class), byte(e.Data), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)})
	b.Write(make([]byte, 8)) // e_ident padding
	var order binary.ByteOrder = binary.LittleEndian
	if e.Data == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	if e.Class == elf.ELFCLASS32 {
		_ = binary.Write(&b, order, struct {
			Type, Machine                              uint16
			Version, Entry, Phoff, Shoff, Flags        uint32
			Ehsize, Phentsize, Phnum, Shentsize, Shnum uint16
			Shstrndx                                   uint16
		}{Type: uint16(elf.ET_EXEC), Machine: uint16(e.Machine), Version: uint32(elf.EV_CURRENT), Ehsize: 52, Phentsize: 32, Shentsize: 40})
	} else {
		_ = binary.Write(&b, order, struct {
			Type, Machine                              uint16
			Version                                    uint32
			Entry, Phoff, Shoff                        uint64
			Flags                                      uint32
			Ehsize, Phentsize, Phnum, Shentsize, Shnum uint16
			Shstrndx                                   uint16
		}{Type: uint16(elf.ET_EXEC), Machine: uint16(e.Machine), Version: uint32(elf.EV_CURRENT), Ehsize: 64, Phentsize: 56, Shentsize: 64})
	}
	b.WriteString("fake csi-registrar for tests: an ELF header only, not a program\n")
	return b.Bytes()
}

const fakeVersion = "v0.0.0-fake.elf-header-only"

// assembleFake writes the fake binaries (image and kubectl plugin, per arch) into a new directory and
// assembles the release there.
func assembleFake(t *testing.T, created time.Time) (string, Result) {
	t.Helper()
	dir := t.TempDir()
	for _, arch := range Archs() {
		if err := os.WriteFile(filepath.Join(dir, BinaryName(fakeVersion, arch)), fakeELFHeaderOnly(arch), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, PluginBinaryName(fakeVersion, arch)), append(fakeELFHeaderOnly(arch), "(the kubectl plugin)\n"...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Assemble(Options{
		Dir: dir, Version: fakeVersion, Created: created, Revision: "0123456789abcdef",
		ModuleDir: repoRoot, MainPackage: "./cmd/csi-registrar", BuildTags: makefileBuildTags(t),
	})
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	return dir, res
}

// TestAssembleFromFakeBinaries runs the release path of `make release` after
// the builds (image, digest, SBOM, sums) on fake binaries, two per platform, and checks the
// result with the release checker.
func TestAssembleFromFakeBinaries(t *testing.T) {
	created := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	dir, res := assembleFake(t, created)
	checkRelease(t, dir, fakeVersion, false)

	// The same input gives the same bytes (and so the same image digest).
	dir2, res2 := assembleFake(t, created)
	a, _ := os.ReadFile(filepath.Join(dir, ArchiveName(fakeVersion)))
	b, _ := os.ReadFile(filepath.Join(dir2, ArchiveName(fakeVersion)))
	if !bytes.Equal(a, b) || res.Index.Digest != res2.Index.Digest {
		t.Errorf("two runs on the same input wrote different archives (index %s vs %s)", res.Index.Digest, res2.Index.Digest)
	}
	names := []string{KrewManifestName(fakeVersion)}
	for _, arch := range Archs() {
		names = append(names, PluginArchiveName(fakeVersion, arch))
	}
	for _, name := range names {
		a, _ := os.ReadFile(filepath.Join(dir, name))
		b, _ := os.ReadFile(filepath.Join(dir2, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("two runs on the same input wrote different %s", name)
		}
	}
	// The krew manifest points at the GitHub release by default.
	m, _ := os.ReadFile(filepath.Join(dir, KrewManifestName(fakeVersion)))
	if want := "uri: " + DefaultDownloadURL(fakeVersion) + PluginArchiveName(fakeVersion, "arm64"); !strings.Contains(string(m), want) {
		t.Errorf("%s does not say %q:\n%s", KrewManifestName(fakeVersion), want, m)
	}
}

// TestAssembleDownloadURL: Options.DownloadURL is where the krew manifest
// sends krew.
func TestAssembleDownloadURL(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range Archs() {
		for _, name := range []string{BinaryName(fakeVersion, arch), PluginBinaryName(fakeVersion, arch)} {
			if err := os.WriteFile(filepath.Join(dir, name), append(fakeELFHeaderOnly(arch), name...), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	const base = "https://downloads.example.com/csi-registrar/"
	if _, err := Assemble(Options{Dir: dir, Version: fakeVersion, Created: time.Unix(1, 0), ModuleDir: repoRoot,
		MainPackage: "./cmd/csi-registrar", BuildTags: makefileBuildTags(t), DownloadURL: base}); err != nil {
		t.Fatal(err)
	}
	checkRelease(t, dir, fakeVersion, false)
	m, _ := os.ReadFile(filepath.Join(dir, KrewManifestName(fakeVersion)))
	if want := "uri: " + base + PluginArchiveName(fakeVersion, "amd64"); !strings.Contains(string(m), want) {
		t.Errorf("%s does not say %q:\n%s", KrewManifestName(fakeVersion), want, m)
	}
}

// TestReleaseDir checks a real release directory: `make release` runs it on
// its output (RELEASE_CHECK_DIR, RELEASE_CHECK_VERSION); skipped otherwise.
func TestReleaseDir(t *testing.T) {
	dir, version := os.Getenv("RELEASE_CHECK_DIR"), os.Getenv("RELEASE_CHECK_VERSION")
	if dir == "" {
		t.Skip("RELEASE_CHECK_DIR unset: `make release` sets it to check its output")
	}
	checkRelease(t, dir, version, true)
}

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.1.0": true, "v1.2.3": true, "v0.2.0-rc.1": true, fakeVersion: true,
		"": false, "1.2.3": false, "v1.2": false, "v1": false, "v1.2.3+meta": false, "v01.2.3": false, "latest": false,
	} {
		err := CheckVersion(v)
		if (err == nil) != ok {
			t.Errorf("CheckVersion(%q) = %v, want ok=%v", v, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "vMAJOR.MINOR.PATCH")) {
			t.Errorf("CheckVersion(%q) = %v: want ErrBadInput naming the rule", v, err)
		}
	}
}

// TestAssembleRefuses: bad input is refused before anything is written.
func TestAssembleRefuses(t *testing.T) {
	dir := t.TempDir()
	base := Options{Dir: dir, Version: "v0.1.0", Created: time.Unix(1, 0), ModuleDir: repoRoot, MainPackage: "./cmd/csi-registrar"}
	for name, mod := range map[string]func(*Options){
		"bad version":    func(o *Options) { o.Version = "0.1" },
		"no time":        func(o *Options) { o.Created = time.Time{} },
		"no binaries":    func(*Options) {},
		"no main module": func(o *Options) { o.MainPackage = "" },
		"http download":  func(o *Options) { o.DownloadURL = "http://example.com/v0.1.0/" },
		"download file":  func(o *Options) { o.DownloadURL = "https://example.com/v0.1.0" },
	} {
		o := base
		mod(&o)
		if _, err := Assemble(o); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: Assemble = %v, want ErrBadInput", name, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("%s: Assemble wrote %v", name, entries)
		}
	}
}

// TestMakeReleaseRefusesBadVersion runs the real `make release` with a
// version that is no release version: it fails at once, naming the rule,
// and creates nothing.
func TestMakeReleaseRefusesBadVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out := filepath.Join(t.TempDir(), "release")
	// "none": no VERSION= at all, where the Makefile's default is git describe's.
	for _, v := range []string{"none", "", "1.2.3", "v1.2"} {
		args := []string{"--no-print-directory", "release", "RELEASE_DIR=" + out}
		if v != "none" {
			args = append(args, "VERSION="+v)
		}
		cmd := exec.Command("make", args...)
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "VERSION=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Dir = repoRoot
		b, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(b), "vMAJOR.MINOR.PATCH") {
			t.Errorf("make release VERSION=%q: %v\n%s\nwant a failure naming vMAJOR.MINOR.PATCH", v, err, b)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("make release VERSION=%q created %s", v, out)
		}
	}
}

// TestBuildRefuses: Build refuses bad input before it creates or builds
// anything: no version, no release version, -ldflags that do not set it.
func TestBuildRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "release")
	base := BuildOptions{Dir: dir, Version: "v0.1.0", ModuleDir: repoRoot, LDFlags: "-s -w -X main.version=v0.1.0"}
	for name, mod := range map[string]func(*BuildOptions){
		"no version":      func(o *BuildOptions) { o.Version = "" },
		"bad version":     func(o *BuildOptions) { o.Version = "v1.2" },
		"version unset":   func(o *BuildOptions) { o.LDFlags = "-s -w" },
		"another version": func(o *BuildOptions) { o.LDFlags = "-s -w -X main.version=v0.1.0-rc.1" },
		"no release dir":  func(o *BuildOptions) { o.Dir = "" },
	} {
		o := base
		mod(&o)
		err := Build(t.Context(), o)
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: Build = %v, want ErrBadInput", name, err)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%s: Build created %s", name, dir)
		}
	}
}
