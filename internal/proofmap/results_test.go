package proofmap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/run is a run's proof directory made by hand from real output:
// make-e2e.json is `go test -json` of a package with TestPasses (and a
// subtest), TestFails and TestSkips; make-test-pluginmanager/1.37.json is
// `go tool test2json` of the same package's `go test -v` output (as .ci/run
// and minors.sh write it), that step exiting 1; the .log files are verify's
// case lines as drivercases prints them; make-e2e-storage.skipped is what
// .ci/run leaves for a step of a slice it did not choose.
func TestVerdicts(t *testing.T) {
	const dir = "testdata/run"
	for _, c := range []struct {
		row  Row
		want string
	}{
		{Row{Proof: Proof{E2E, "TestPasses"}, Step: "make e2e", Expect: ExpectPass}, Pass},
		{Row{Proof: Proof{E2E, "TestFails"}, Step: "make e2e", Expect: ExpectPass}, Fail},
		{Row{Proof: Proof{E2E, "TestSkips"}, Step: "make e2e", Expect: ExpectPass}, Fail},
		{Row{Proof: Proof{E2E, "TestSkips"}, Step: "make e2e", Expect: ExpectSkip}, Skip},
		{Row{Proof: Proof{E2E, "TestGone"}, Step: "make e2e", Expect: ExpectPass}, Missing},
		{Row{Proof: Proof{PluginManager, "TestPasses"}, Step: "make test-pluginmanager", Expect: ExpectPass}, Pass},
		{Row{Proof: Proof{PluginManager, "TestFails"}, Step: "make test-pluginmanager", Expect: ExpectPass}, Fail},
		{Row{Proof: Proof{Target, "e2e"}, Step: "make e2e", Expect: ExpectPass}, Pass},
		{Row{Proof: Proof{Target, "test-pluginmanager"}, Step: "make test-pluginmanager", Expect: ExpectPass}, Fail},
		{Row{Proof: Proof{Target, "e2e-kind"}, Step: "make e2e-kind", Expect: ExpectPass}, Missing},
		{Row{Proof: Proof{Case, "1_deployed"}, Step: "make e2e-driver (5 layouts)", Expect: ExpectPass}, Pass},
		{Row{Proof: Proof{Case, "6_rollout"}, Step: "make e2e-driver (5 layouts)", Expect: ExpectPass}, Fail},
		{Row{Proof: Proof{Case, "2_registrar_pod_deleted"}, Step: "make e2e-driver (5 layouts)", Expect: ExpectPass}, Missing},
		{Row{Proof: Proof{Case, "R1_mode_manifests"}, Step: "make e2e-notready", Expect: ExpectPass}, Pass},
		// make-e2e-storage.skipped: a step of slice 3, which this run did not choose.
		{Row{Proof: Proof{Target, "e2e-storage"}, Step: "make e2e-storage", Expect: ExpectPass}, NotChosen},
	} {
		s, err := ReadStep(dir, c.row.Step)
		if err != nil {
			t.Fatal(err)
		}
		if got, why := Verdict(c.row, s); got != c.want {
			t.Errorf("%s in %q: %s (%s), want %s", c.row.Proof, c.row.Step, got, why, c.want)
		}
	}
}

// TestReadStepBadNumber: a .rc or .skipped file that does not hold a number
// is an error naming the file, its text and what it should be.
func TestReadStepBadNumber(t *testing.T) {
	for file, want := range map[string]string{
		"make-e2e.rc":      "is not an exit code",
		"make-e2e.skipped": "is not a slice's number",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, file), []byte("x1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadStep(dir, "make e2e")
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), `"x1\n"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s holding x1: %v, want an error naming it and saying it %s", file, err, want)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"make e2e":                                      "make-e2e",
		"make e2e-driver (5 layouts)":                   "make-e2e-driver-5-layouts",
		"make e2e K8S=1.34":                             "make-e2e-k8s-1-34",
		"make demo-down (kind)":                         "make-demo-down-kind",
		"make e2e-driver E2E_PROVIDER=kind (5 layouts)": "make-e2e-driver-e2e-provider-kind-5-layouts",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
