package drivercases

import (
	"os"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// specOf renders a kustomize directory of the repository as `kubectl
// kustomize` does and parses it as verify does.
func specOf(t *testing.T, dir string) *driverspec.Spec {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	s, err := driverspec.Parse(y, "csi-registrar:dev")
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return s
}

func TestModeManifestsReferenceIsReady(t *testing.T) {
	f := checkModeManifests(specOf(t, "../../manifests"))
	if f.Ports != "" || len(f.Blocking) > 0 || len(f.Needs) > 0 {
		t.Errorf("manifests/: %+v, want nothing to say", f)
	}
}

func TestModeManifestsWithoutTheModeSaysWhatItNeeds(t *testing.T) {
	f := checkModeManifests(specOf(t, "../../manifests/overlays/without-rolling-update"))
	wantSays(t, "needs", strings.Join(f.Needs, "\n"), "--rolling-update=$(POD_UID)", "maxSurge 1", "a CSI socket per pod")
	if f.Ports != "" || len(f.Blocking) > 0 {
		t.Errorf("without the mode nothing blocks: %+v", f)
	}
}

func TestModeManifestsHostPortExample(t *testing.T) {
	f := checkModeManifests(specOf(t, "../../manifests/examples/notready/hostport"))
	if !strings.Contains(f.Ports, "9809") || !strings.Contains(f.Ports, "containerPort 9809 with hostNetwork") || !strings.Contains(f.Ports, "drop hostNetwork") {
		t.Errorf("ports %q: want the registrar's port named, with the fix", f.Ports)
	}
}

func TestHostPortsFromFlags(t *testing.T) {
	spec := &corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{
		{Name: "driver", Args: []string{"--endpoint=unix:///csi/csi.sock", "--health-port=9808", "--max-volumes-per-node=16", "--metrics-address", "0.0.0.0:8080", "--v=5"}},
		{Name: "probe", Args: []string{"--health-port=9808"}, Ports: []corev1.ContainerPort{{ContainerPort: 9808}}},
	}}
	got := hostPorts(spec)
	var ports []string
	for _, p := range got {
		ports = append(ports, p.Port)
	}
	if strings.Join(ports, ",") != "9808,8080" {
		t.Errorf("hostPorts = %+v, want 9808 (declared once) and 8080 (a flag), not the unix socket or a count", got)
	}
	spec.HostNetwork = false
	if got := hostPorts(spec); len(got) != 0 {
		t.Errorf("without hostNetwork: %+v, want none", got)
	}
}

func TestModeManifestsNotReadyExamplesPassR1(t *testing.T) {
	// Their faults are in the driver, not in the manifests: R2-R4 find them.
	for _, d := range []string{"memvolumes", "loadatstart", "stopatterm", "removesockets"} {
		s := specOf(t, "../../manifests/examples/notready/"+d)
		if f := checkModeManifests(s); f.Ports != "" || len(f.Blocking) > 0 || len(f.Needs) > 0 {
			t.Errorf("%s: %+v", d, f)
		}
		if s.DriverName != "notready.csi.example.com" || s.Registrar != "registrar" || !perPod(s.HostSocket) {
			t.Errorf("%s: driver %q, registrar %q, socket %q", d, s.DriverName, s.Registrar, s.HostSocket)
		}
	}
}

func TestNotReadyExpectationsParse(t *testing.T) {
	b, err := os.ReadFile("../../manifests/examples/notready/expect.txt")
	if err != nil {
		t.Fatal(err)
	}
	exp, err := ParseExpectations(string(b))
	if err != nil {
		t.Fatal(err)
	}
	// Each fault fails its own case.
	own := map[string]string{"memvolumes": CaseVolumesAcross, "loadatstart": CaseVolumesAcross, "stopatterm": CaseServesAfterTerm, "removesockets": CaseOwnSocket, "hostport": CaseModeManifests}
	for d, c := range own {
		found := false
		for _, e := range exp {
			found = found || e.Driver == "notready/"+d && e.Case == c && e.Verdict == "FAIL" && e.Text != ""
		}
		if !found {
			t.Errorf("expect.txt: no FAIL of %s with its cause for notready/%s", c, d)
		}
	}
}
