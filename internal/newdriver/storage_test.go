package newdriver

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/storagee2e"
)

// TestStorageDefinition: the project's test/storage-e2e.yaml is the
// reference driver's definition renamed: the suite reads the same claims
// for the project's driver, and its comments speak of the project's make
// target, not of csi-registrar's.
func TestStorageDefinition(t *testing.T) {
	o := Options{Module: testModule, Driver: testDriver, Source: checkout(t)}
	files, err := o.files()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(files, func(f file) bool { return f.path == "test/storage-e2e.yaml" })
	if i < 0 {
		t.Fatal("no test/storage-e2e.yaml")
	}
	p := filepath.Join(t.TempDir(), "storage-e2e.yaml")
	if err := os.WriteFile(p, files[i].data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := storagee2e.LoadDefinition(p)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := storagee2e.LoadDefinition(filepath.Join("..", "..", filepath.FromSlash(StorageDefinition)))
	if err != nil {
		t.Fatal(err)
	}
	if got.DriverInfo.Name != testDriver {
		t.Errorf("DriverInfo.Name %q, want %q", got.DriverInfo.Name, testDriver)
	}
	if g, r := strings.Replace(got.String(), testDriver, "DRIVER", 1), strings.Replace(ref.String(), ref.DriverInfo.Name, "DRIVER", 1); g != r {
		t.Errorf("claims %q, the reference's %q", g, r)
	}
	text := string(files[i].data)
	for _, want := range []string{"make storage-e2e", "Derived from the reference driver's definition in manifests/examples/storage-e2e/ of"} {
		if !strings.Contains(text, want) {
			t.Errorf("test/storage-e2e.yaml does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "make e2e-storage") {
		t.Errorf("test/storage-e2e.yaml speaks of csi-registrar's make e2e-storage:\n%s", text)
	}
}

// fakeKubectl logs its arguments to $TOOL_LOG and fails `csi-registrar
// storage-e2e --help` when $NO_STORAGE_E2E is set (an older plugin).
const fakeKubectl = `#!/bin/sh
echo "kubectl $*" >>"$TOOL_LOG"
[ -n "$NO_STORAGE_E2E" ] && [ "$3" = --help ] && exit 1
exit 0
`

// TestMakefileStorageE2E runs the generated Makefile's storage-e2e target
// with a kubectl that logs what it is asked: the plugin's storage-e2e on
// the project's definition, STORAGE_E2E_ARGS added; without the command,
// exit 2 and what to do.
func TestMakefileStorageE2E(t *testing.T) {
	makefile := renderedMakefile(t)
	dir, fake := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), makefile, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "kubectl"), []byte(fakeKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(fake, "log")
	env := append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"), "TOOL_LOG="+log, "MAKEFLAGS=")
	cmd := exec.Command("make", "--no-print-directory", "storage-e2e", "STORAGE_E2E_ARGS=--focus read-only")
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make storage-e2e: %v\n%s", err, out)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "kubectl csi-registrar storage-e2e --help\nkubectl csi-registrar storage-e2e --definition test/storage-e2e.yaml --out bin/storage-e2e --focus read-only\n"
	if string(data) != want {
		t.Errorf("kubectl was asked:\n%s\nwant:\n%s", data, want)
	}

	cmd = exec.Command("make", "--no-print-directory", "storage-e2e")
	cmd.Dir, cmd.Env = dir, append(env, "NO_STORAGE_E2E=1")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "needs the kubectl plugin kubectl-csi_registrar with its storage-e2e command") {
		t.Errorf("make storage-e2e without the command: %v\n%s", err, out)
	}
}
