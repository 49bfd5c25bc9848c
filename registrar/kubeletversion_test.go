package registrar_test

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// What a kubelet on this platform makes of the versions the registrar
// announces. The kubelet's CSI handler (pkg/volume/csi/csi_plugin.go,
// ValidatePlugin and RegisterPlugin through validateVersions, 1.34-1.38)
// takes a registration's version from
// k8s.io/apimachinery/pkg/util/version.HighestSupportedVersion, which parses
// each dot-separated field with strconv.ParseUint(field, 10, 0): a number as
// wide as the kubelet's uint, 32 bits on linux/arm. These tests call that
// function, at go.mod's apimachinery version, on the platform the test binary
// runs on; make test-platforms runs them under each release platform's
// emulator, so the 32-bit parse is the real one of a 32-bit build.

// kubeletValidatePlugin is the kubelet's CSI handler's ValidatePlugin for
// the first registration of a name (no other driver of that name, so no
// "higher supported version" comparison): its version check is
// HighestSupportedVersion itself; its error is worded as the kubelet's plugin
// manager notifies it (operation_generator.go), which the registrar reads.
func kubeletValidatePlugin(name, endpoint string, versions []string) (*utilversion.Version, error) {
	v, err := utilversion.HighestSupportedVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver %s at endpoint %s: "+
			"kubernetes.io/csi: ValidatePlugin for CSI driver %q failed. None of the versions specified %q are supported. err=%v",
			name, endpoint, name, versions, err)
	}
	return v, nil
}

// fitsKubeletUint reports whether every field of version v fits in a uint
// of this platform, computed without the kubelet's code: a field of more
// than 32 bits does not fit where int has 32.
func fitsKubeletUint(t *testing.T, v string) bool {
	t.Helper()
	for _, f := range strings.Split(v, ".") {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("version %q: field %q is no number: %v", v, f, err)
		}
		if strconv.IntSize == 32 && n > math.MaxUint32 {
			return false
		}
	}
	return true
}

// kubeletRegisters plays this platform's kubelet on the registration socket
// at path, which the registrar serves (its stage is "waiting for kubelet"):
// GetInfo, the CSI handler's validation (kubeletValidatePlugin),
// then, if it passes, the registration (registrartest.Register), else the
// notification of its error. It returns the versions announced and the
// kubelet's error ("" when registered).
func kubeletRegisters(t *testing.T, path string) (versions []string, refusal string) {
	t.Helper()
	info, err := registrartest.GetInfoSocket(t.Context(), path)
	if err != nil {
		t.Fatalf("GetInfo on %s: %v", path, err)
	}
	versions = info.GetSupportedVersions()
	wantOK := len(versions) > 0
	for _, v := range versions {
		wantOK = wantOK && fitsKubeletUint(t, v)
	}
	got, err := kubeletValidatePlugin(info.GetName(), info.GetEndpoint(), versions)
	if (err == nil) != wantOK {
		t.Fatalf("linux/%s (int %d bits): the kubelet's version parse of %q gave %v, %v; want accepted=%v",
			runtime.GOARCH, strconv.IntSize, versions, got, err, wantOK)
	}
	if err != nil {
		if err := registrartest.NotifySocket(t.Context(), path, false, err.Error()); err != nil {
			t.Fatalf("notifying %s: %v", path, err)
		}
		return versions, err.Error()
	}
	if got.Major() != 1 || !slices.Contains(versions, got.String()) {
		t.Fatalf("the kubelet's parse of %q took %s: want one of them, major 1", versions, got)
	}
	if reg, err := registrartest.Register(t.Context(), path); err != nil || reg.Err != nil {
		t.Fatalf("registering %s: %v, %v", path, err, reg)
	}
	return versions, ""
}

// Without --rolling-update the registrar announces 1.0.0: every platform's
// kubelet parses it and registers the driver.
func TestKubeletParsesPlainAnnouncement(t *testing.T) {
	e := newEnv(t)
	startStubDriver(t, e, stubName)
	r, _ := startRegistrar(t, e, nil, nil)
	st := awaitStatus(t, r, "the socket served", stageIs(registrar.StageWaitingForKubelet))
	versions, refusal := kubeletRegisters(t, st.SocketPath)
	if refusal != "" {
		t.Fatalf("linux/%s's kubelet refused the plain announcement %q: %s", runtime.GOARCH, versions, refusal)
	}
	awaitStatus(t, r, "registered", stageIs(registrar.StageRegistered))
	fmt.Printf("kubeletversion: linux/%s int=%d plain announcement %q: accepted, registered\n", runtime.GOARCH, strconv.IntSize, versions)
}
