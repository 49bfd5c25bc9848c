package storagee2e

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

func writeDef(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "def.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const inlineDef = `DriverInfo:
  Name: stub.csi.example.com
  Capabilities: {persistence: false, exec: true, multipods: true}
InlineVolumes:
  - Attributes: {}
`

func TestReferenceDefinition(t *testing.T) {
	d, err := LoadDefinition("../../manifests/examples/storage-e2e/stub.csi.example.com.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.DriverInfo.Name != "stub.csi.example.com" || len(d.InlineVolumes) != 1 || d.StorageClass.set() {
		t.Errorf("reference definition: %s, %d inline volumes, StorageClass %v", d, len(d.InlineVolumes), d.StorageClass.set())
	}
	if got, want := strings.Join(d.ClaimedCapabilities(), " "), "exec multipods"; got != want {
		t.Errorf("capabilities %q, want %q", got, want)
	}
	// The driver is the one manifests/ deploys.
	csidriver, err := os.ReadFile("../../manifests/base/csidriver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(csidriver), "name: "+d.DriverInfo.Name+"\n") {
		t.Errorf("manifests/base/csidriver.yaml does not name %s", d.DriverInfo.Name)
	}
}

func TestLoadDefinitionErrors(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"no name":        {"DriverInfo: {Capabilities: {exec: true}}\nInlineVolumes: [{}]\n", "DriverInfo.Name is empty"},
		"no volume type": {"DriverInfo: {Name: x.example.com}\n", "claims no volume type"},
		"not yaml":       {"DriverInfo: [\n", "driverDefinition"},
		// The suite decodes case-sensitively: a lower-case key is not the field.
		"lower case": {"driverInfo: {Name: x}\nInlineVolumes: [{}]\n", "DriverInfo.Name is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writeDef(t, tc.body)
			_, err := LoadDefinition(p)
			var oe *csiplugin.ValidationError
			if !errors.As(err, &oe) || oe.What != string(OptionDefinition) || oe.Value != p || oe.Fix == "" || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %#v, want a *csiplugin.ValidationError of the definition, with a fix, containing %q", err, tc.want)
			}
		})
	}
	absent := filepath.Join(t.TempDir(), "absent.yaml")
	if _, err := LoadDefinition(absent); err == nil || !strings.Contains(err.Error(), `invalid Options.Definition "`+absent+`": cannot be read`) {
		t.Errorf("an absent file: %v", err)
	}
}

func TestFocus(t *testing.T) {
	inline, err := LoadDefinition(writeDef(t, inlineDef))
	if err != nil {
		t.Fatal(err)
	}
	withClass, err := LoadDefinition(writeDef(t, "DriverInfo: {Name: pd.csi.example.com}\nStorageClass: {FromName: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		eph = "External Storage [Driver: stub.csi.example.com] [Testpattern: CSI Ephemeral-volume (default fs)] ephemeral should create read/write inline ephemeral volume"
		dyn = "External Storage [Driver: stub.csi.example.com] [Testpattern: Dynamic PV (default fs)] provisioning should provision storage with defaults"
		pd  = "External Storage [Driver: pd.csi.example.com] [Testpattern: Dynamic PV (default fs)] provisioning should provision storage with defaults"
	)
	for _, tc := range []struct {
		d    *Definition
		spec string
		want bool
	}{
		{inline, eph, true}, {inline, dyn, false}, {inline, pd, false},
		{withClass, pd, true}, {withClass, dyn, false},
	} {
		if got := regexp.MustCompile(tc.d.Focus()).MatchString(tc.spec); got != tc.want {
			t.Errorf("focus %q on %q: %v, want %v", tc.d.Focus(), tc.spec, got, tc.want)
		}
	}
}
