package newdriver

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	testModule = "example.com/fast-csi"
	testDriver = "fast.csi.example.com"
	testBinary = "fast-csi"
	testPkg    = "fastcsi"
)

// TestGenerate generates a project from this checkout and builds, vets and
// tests it as its author would (go test runs the renamed csi-sanity suite and
// the main package's tests), then renders its manifests with kustomize.
func TestGenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generating, building and testing a project takes about 30 s")
	}
	dir := filepath.Join(t.TempDir(), "fast-csi")
	// The new module resolves what the source's go.sum lacks through the
	// module proxy, outside any go.work, writing go.mod as needed.
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	res, err := Generate(ctx, Options{Module: testModule, Driver: testDriver, Dir: dir, Source: checkout(t)}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated %d files, go mod tidy included, in %s", len(res.Files), time.Since(start).Round(100*time.Millisecond))
	for _, want := range []string{"go.mod", "go.sum", "LICENSE", "README.md", "Makefile", "Dockerfile", ".github/workflows/ci.yaml",
		"cmd/fast-csi/main.go", "pkg/fastcsi/driver.go", "pkg/fastcsi/sanity_test.go", "test/storage-e2e.yaml",
		"manifests/kustomization.yaml", "manifests/base/daemonset.yaml", "manifests/in-process/kustomization.yaml",
		"manifests/without-rolling-update/kustomization.yaml"} {
		if !slices.Contains(res.Files, want) {
			t.Errorf("%s not generated (files: %v)", want, res.Files)
		}
	}

	// The project builds where the generator's checkout is not: moved to
	// another directory, the original removed, no file naming the checkout,
	// go.mod complete as go mod tidy left it.
	dir = moveProject(t, dir)
	checkNoCheckoutPath(t, dir, checkout(t).Dir)
	t.Setenv("GOFLAGS", "-mod=readonly")
	goCmd(ctx, t, dir, "build", "./...")
	goCmd(ctx, t, dir, "vet", "./...")
	out := goCmd(ctx, t, dir, "test", "-count=1", "-run", "^(TestSanity|TestVersion|TestBadInput|TestProbeWithoutDriver|TestProbeEndpointFromEnvironment)$", "./...")
	for _, want := range []string{"ok  \t" + testModule + "/pkg/" + testPkg, "ok  \t" + testModule + "/cmd/" + testBinary} {
		if !strings.Contains(out, want) {
			t.Errorf("go test did not report %q:\n%s", want, out)
		}
	}

	checkRenamed(t, dir)
	checkGoMod(t, dir)
	checkManifests(t, dir)
}

// moveProject copies the project at dir to a new temporary directory,
// removes dir and returns the copy.
func moveProject(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "elsewhere", filepath.Base(dir))
	if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return to
}

// checkNoCheckoutPath: no file of the project names the checkout it was
// generated from, and none is a symbolic link.
func checkNoCheckoutPath(t *testing.T, dir, checkoutDir string) {
	t.Helper()
	if !filepath.IsAbs(checkoutDir) {
		t.Fatalf("checkout %q is not absolute", checkoutDir)
	}
	n := 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if e.Type()&fs.ModeSymlink != 0 {
			t.Errorf("%s is a symbolic link", p)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if strings.Contains(string(b), checkoutDir) {
			rel, _ := filepath.Rel(dir, p)
			t.Errorf("%s names the checkout %s", rel, checkoutDir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files, none naming %s", n, checkoutDir)
}

// goCmd runs the go command in dir and returns its output.
func goCmd(ctx context.Context, t *testing.T, dir string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("go %s: %s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// checkRenamed: no file still names the reference driver, and every Go
// file taken from it carries the license notice.
func checkRenamed(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() == "go.sum" || e.Name() == "LICENSE" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		for _, old := range []string{"stub.csi.example.com", "csi-stub", "/stubdriver\"", "package stubdriver", "stubdriver."} {
			if strings.Contains(string(b), old) {
				t.Errorf("%s still contains %q", rel, old)
			}
		}
		if strings.HasPrefix(rel, "pkg/") && !strings.Contains(string(b), "Apache License, Version 2.0") {
			t.Errorf("%s has no license notice", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pkg", testPkg, "driver.go"))
	if err != nil || !strings.Contains(string(b), `const DefaultName = "`+testDriver+`"`) {
		t.Errorf("driver.go does not set DefaultName to %q: %v", testDriver, err)
	}
}

// checkGoMod: the project requires csi-registrar, replaced by its copy in
// third_party/, a module with csi-registrar's go.mod.
func checkGoMod(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module " + testModule + "\n", ModulePath + " " + checkoutVersion, "replace " + ModulePath + " => ./" + thirdPartyDir + "\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("go.mod does not contain %q:\n%s", want, b)
		}
	}
	b, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(thirdPartyDir), "go.mod"))
	if err != nil || !strings.HasPrefix(string(b), "module "+ModulePath+"\n") {
		t.Errorf("%s/go.mod does not declare %s: %v", thirdPartyDir, ModulePath, err)
	}
}

// checkManifests renders the three variants as `kubectl kustomize` does and
// checks that the driver name is everywhere it must be, and that manifests/
// and in-process/ run the rolling-update mode and without-rolling-update/
// does not.
func checkManifests(t *testing.T, dir string) {
	t.Helper()
	sockDir := "/var/lib/kubelet/plugins/" + testDriver
	podSock := sockDir + "/$(POD_UID).sock"
	for _, v := range []struct {
		dir        string
		containers []string
		mode       bool
	}{
		{"manifests", []string{"driver", "registrar"}, true},
		{"manifests/in-process", []string{"driver"}, true},
		{"manifests/without-rolling-update", []string{"driver", "registrar"}, false},
	} {
		t.Run(v.dir, func(t *testing.T) {
			csiDriver, ds := render(t, filepath.Join(dir, v.dir))
			if csiDriver.Name != testDriver || csiDriver.Spec.PodInfoOnMount == nil || !*csiDriver.Spec.PodInfoOnMount {
				t.Errorf("CSIDriver %q podInfoOnMount %v, want %q true", csiDriver.Name, csiDriver.Spec.PodInfoOnMount, testDriver)
			}
			if ds.Namespace != testBinary || ds.Name != testBinary+"-node" {
				t.Errorf("DaemonSet %s/%s, want %s/%s-node", ds.Namespace, ds.Name, testBinary, testBinary)
			}
			ru := ds.Spec.UpdateStrategy.RollingUpdate
			surge, unavailable := ru.MaxSurge.String(), ru.MaxUnavailable.String()
			if want := map[bool]string{true: "1/0", false: "0/1"}[v.mode]; surge+"/"+unavailable != want {
				t.Errorf("maxSurge/maxUnavailable %s/%s, want %s", surge, unavailable, want)
			}
			spec := ds.Spec.Template.Spec
			var names []string
			for _, c := range spec.Containers {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, v.containers) {
				t.Fatalf("containers %v, want %v", names, v.containers)
			}
			drv := spec.Containers[0]
			env := func(c int) map[string]string {
				m := map[string]string{}
				for _, e := range spec.Containers[c].Env {
					m[e.Name] = e.Value
					if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
						m[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
					}
				}
				return m
			}
			if drv.Image != testBinary+":dev" {
				t.Errorf("driver image %q, want %s:dev", drv.Image, testBinary)
			}
			want := []string{"--endpoint=$(CSI_ENDPOINT)", "--driver-name=" + testDriver, "--topology=topology." + testDriver + "/zone=zone-a",
				"--state-dir=/var/lib/" + testBinary + "/" + testDriver}
			drvEnv := env(0)
			if v.mode {
				want = append(want, "--shutdown-delay=5s")
				if drvEnv["POD_UID"] != "fieldRef:metadata.uid" || drvEnv["CSI_ENDPOINT"] != "unix:///csi/$(POD_UID).sock" {
					t.Errorf("driver env %v, want POD_UID from metadata.uid and CSI_ENDPOINT=unix:///csi/$(POD_UID).sock", drvEnv)
				}
			} else {
				if _, ok := drvEnv["POD_UID"]; ok || drvEnv["CSI_ENDPOINT"] != "unix:///csi/csi.sock" || slices.Contains(drv.Args, "--shutdown-delay=5s") {
					t.Errorf("driver env %v args %q, want no POD_UID, CSI_ENDPOINT=unix:///csi/csi.sock, no --shutdown-delay", drvEnv, drv.Args)
				}
			}
			if v.dir == "manifests/in-process" {
				want = append(want, "--register", "--kubelet-registration-path="+podSock, "--rolling-update=$(POD_UID)")
				if drv.ReadinessProbe == nil || drv.ReadinessProbe.HTTPGet == nil || drv.ReadinessProbe.HTTPGet.Path != "/readyz" {
					t.Errorf("driver readiness probe %+v, want GET /readyz", drv.ReadinessProbe)
				}
			}
			for _, arg := range want {
				if !slices.Contains(drv.Args, arg) {
					t.Errorf("driver args %q lack %q", drv.Args, arg)
				}
			}
			// The kubelet does not expand $(VAR) in an exec probe's command:
			// the probe must name no variable and read CSI_ENDPOINT.
			if p := drv.LivenessProbe; p == nil || p.Exec == nil || strings.Contains(strings.Join(p.Exec.Command, " "), "$(") ||
				strings.Contains(strings.Join(p.Exec.Command, " "), "-endpoint") {
				t.Errorf("driver liveness probe %+v, want an exec probe without -endpoint or $(VAR)", p)
			}
			if len(spec.Containers) > 1 {
				reg := spec.Containers[1]
				regEnv := env(1)
				wantSock, wantArgs := sockDir+"/csi.sock", []string{"--csi-address=/csi/csi.sock"}
				if v.mode {
					wantSock, wantArgs = podSock, []string{"--csi-address=/csi/$(POD_UID).sock", "--rolling-update=$(POD_UID)"}
					if regEnv["POD_UID"] != "fieldRef:metadata.uid" {
						t.Errorf("registrar env %v, want POD_UID from metadata.uid", regEnv)
					}
				} else if slices.ContainsFunc(reg.Args, func(a string) bool { return strings.HasPrefix(a, "--rolling-update") }) {
					t.Errorf("registrar args %q: --rolling-update without the mode", reg.Args)
				}
				if reg.Image != "csi-registrar:dev" || regEnv["DRIVER_REG_SOCK_PATH"] != wantSock {
					t.Errorf("registrar image %q env %v, want csi-registrar:dev and DRIVER_REG_SOCK_PATH=%s", reg.Image, regEnv, wantSock)
				}
				for _, arg := range wantArgs {
					if !slices.Contains(reg.Args, arg) {
						t.Errorf("registrar args %q lack %q", reg.Args, arg)
					}
				}
				if reg.ReadinessProbe == nil || reg.ReadinessProbe.HTTPGet == nil || reg.ReadinessProbe.HTTPGet.Path != "/readyz" {
					t.Errorf("registrar readiness probe %+v, want GET /readyz", reg.ReadinessProbe)
				}
			}
			paths := map[string]string{}
			for _, vol := range spec.Volumes {
				if vol.HostPath != nil {
					paths[vol.Name] = vol.HostPath.Path
				}
			}
			if paths["socket-dir"] != sockDir+"/" ||
				paths["state-dir"] != "/var/lib/"+testBinary+"/"+testDriver ||
				paths["registration-dir"] != "/var/lib/kubelet/plugins_registry/" {
				t.Errorf("hostPaths %v do not name the driver %s", paths, testDriver)
			}
		})
	}
}

// render runs kustomize on dir and returns its CSIDriver and DaemonSet.
func render(t *testing.T, dir string) (*storagev1.CSIDriver, *appsv1.DaemonSet) {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var csiDriver *storagev1.CSIDriver
	var ds *appsv1.DaemonSet
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "CSIDriver":
			csiDriver = &storagev1.CSIDriver{}
			err = yaml.UnmarshalStrict(b, csiDriver)
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			err = yaml.UnmarshalStrict(b, ds)
		case "Namespace":
		default:
			t.Errorf("%s renders an unexpected %s", dir, r.GetKind())
		}
		if err != nil {
			t.Fatalf("%s %s: %v", r.GetKind(), r.GetName(), err)
		}
	}
	if csiDriver == nil || ds == nil {
		t.Fatalf("%s renders no CSIDriver or no DaemonSet", dir)
	}
	return csiDriver, ds
}

// TestReleasedSource: a project generated from a released version requires
// it, with no replace, and its CI checks out the same tag.
func TestReleasedSource(t *testing.T) {
	src := checkout(t)
	src.Version = "v0.1.0"
	o := Options{Module: testModule, Driver: testDriver, Dir: t.TempDir(), Source: src}
	files, err := o.files()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"go.mod":                    {"require " + ModulePath + " v0.1.0\n"},
		".github/workflows/ci.yaml": {"ref: v0.1.0\n"},
		"README.md":                 {"requires csi-registrar v0.1.0"},
		"pkg/fastcsi/driver.go":     {"(v0.1.0), licensed under"},
	}
	for _, f := range files {
		for _, w := range want[f.path] {
			if !strings.Contains(string(f.data), w) {
				t.Errorf("%s does not contain %q:\n%s", f.path, w, f.data)
			}
		}
		delete(want, f.path)
		if f.path == "go.mod" && strings.Contains(string(f.data), "replace") {
			t.Errorf("go.mod replaces a released version:\n%s", f.data)
		}
	}
	for p := range want {
		t.Errorf("%s not generated", p)
	}
}

// TestCheckoutSourceFiles: a project generated from a checkout names no
// absolute path, carries the csi-registrar packages it imports (and no
// test file of them) in third_party/, and its CI clones nothing.
func TestCheckoutSourceFiles(t *testing.T) {
	src := checkout(t)
	o := Options{Module: testModule, Driver: testDriver, Dir: t.TempDir(), Source: src}
	files, err := o.files()
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	for _, f := range files {
		if strings.Contains(string(f.data), src.Dir) {
			t.Errorf("%s names the checkout %s", f.path, src.Dir)
		}
		if rest, ok := strings.CutPrefix(f.path, thirdPartyDir+"/"); ok {
			if strings.HasSuffix(rest, "_test.go") {
				t.Errorf("%s: a test file copied", f.path)
			}
			copied = append(copied, path.Dir(rest))
		}
		if f.path == ".github/workflows/ci.yaml" && (strings.Contains(string(f.data), "repository:") || strings.Contains(string(f.data), "use-checkout")) {
			t.Errorf("the CI workflow clones csi-registrar, which is not published:\n%s", f.data)
		}
	}
	copied = slices.Compact(slices.Sorted(slices.Values(copied)))
	// What the generated main and the renamed driver import, and what those import.
	want := []string{".", "registrar", "registrar/csiplugin", "registrar/csiplugin/grpcserve", "registrar/csiplugin/sockfile"}
	for _, w := range want {
		if !slices.Contains(copied, w) {
			t.Errorf("%s/%s not copied (copied: %v)", thirdPartyDir, w, copied)
		}
	}
	for _, c := range copied {
		if strings.HasPrefix(c, "stubdriver") || strings.HasPrefix(c, "cmd") || strings.HasPrefix(c, "internal") {
			t.Errorf("%s/%s copied: the project does not import it", thirdPartyDir, c)
		}
	}
}
