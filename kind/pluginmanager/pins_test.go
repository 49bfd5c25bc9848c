package pluginmanager

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	fakeclient "k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/reconciler"
)

// moduleVersion returns the version of the module whose code fn is, read
// from the path of its source file in the module cache ("…/k8s.io/kubelet@v0.34.10/…").
func moduleVersion(t *testing.T, module string, fn any) string {
	t.Helper()
	file, _ := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).FileLine(reflect.ValueOf(fn).Pointer())
	_, rest, ok := strings.Cut(file, module+"@")
	if !ok {
		t.Fatalf("%s is not from %s's module cache directory", file, module)
	}
	v, _, _ := strings.Cut(rest, "/")
	return v
}

// TestKubeletPins: the kubelet code under test is the patch release the
// local node's build module pins for its minor
// (kind/localnode/k8sbuild/<minor>/go.mod, or pre-<version>/ for a pinned
// pre-release), staging modules included: the
// tests run what the local node runs. Regenerate with ./gen-modfile.sh.
func TestKubeletPins(t *testing.T) {
	linked := map[string]string{
		"k8s.io/kubernetes": moduleVersion(t, "k8s.io/kubernetes", reconciler.NewReconciler),
		"k8s.io/kubelet":    moduleVersion(t, "k8s.io/kubelet", registerapi.NewRegistrationClient),
		"k8s.io/client-go":  moduleVersion(t, "k8s.io/client-go", fakeclient.NewClientset),
		"k8s.io/api":        moduleVersion(t, "k8s.io/api", storagev1.Resource),
	}
	k8s := linked["k8s.io/kubernetes"]
	parts := strings.SplitN(strings.TrimPrefix(k8s, "v"), ".", 3)
	if len(parts) < 2 {
		t.Fatalf("k8s.io/kubernetes %q: not a version", k8s)
	}
	minor := parts[0] + "." + parts[1]
	t.Logf("kubelet code: k8s.io/kubernetes %s", k8s)
	// A pre-release (v1.38.0-beta.0) is pinned by k8sbuild/pre-1.38.0-beta.0/.
	dir, gen := minor, minor
	if strings.Contains(k8s, "-") {
		dir, gen = "pre-"+strings.TrimPrefix(k8s, "v"), strings.TrimPrefix(k8s, "v")
	}
	src := filepath.Join("..", "localnode", "k8sbuild", dir, "go.mod")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("Kubernetes %s is not a supported minor (%v): the tests run only against a minor the local node builds", minor, err)
	}
	// Its lines "require M V", "\tM V // indirect" and "\tM => M V":
	// a replace wins over a require.
	pinned := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "require "))
		switch {
		case len(f) >= 4 && f[1] == "=>":
			pinned[f[0]] = f[3]
		case len(f) >= 2 && strings.HasPrefix(f[1], "v"):
			if _, replaced := pinned[f[0]]; !replaced {
				pinned[f[0]] = f[1]
			}
		}
	}
	for mod, got := range linked {
		if want := pinned[mod]; got != want {
			t.Errorf("%s is %s here, %s pins %s: regenerate with ./gen-modfile.sh %s", mod, got, src, want, gen)
		}
	}
}
