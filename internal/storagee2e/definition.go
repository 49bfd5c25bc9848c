package storagee2e

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Definition is the part of a test-driver definition file (the suite's
// driverDefinition, test/e2e/storage/external/external.go) that decides which
// specs apply and which skips it explains. Field names are the suite's, which
// decodes them case-sensitively.
type Definition struct {
	DriverInfo struct {
		Name string
		// Capabilities as the suite names them (persistence, exec,
		// multipods, block, onlineExpansion, ...); absent is false.
		Capabilities map[string]bool
		TopologyKeys []string
	}
	StorageClass          classSource
	SnapshotClass         classSource
	GroupSnapshotClass    classSource
	VolumeAttributesClass classSource
	InlineVolumes         []struct {
		Attributes map[string]string
		Shared     bool
		ReadOnly   bool
	}

	path string
}

// classSource is how a definition names a class: none of its fields set
// means the tests that need the class are skipped.
type classSource struct {
	FromName              bool
	FromFile              string
	FromExistingClassName string
}

func (c classSource) set() bool {
	return c.FromName || c.FromFile != "" || c.FromExistingClassName != ""
}

// LoadDefinition reads a definition file (YAML or JSON) and checks that it
// names a driver and claims at least one volume type the suite can test.
// Its errors are *csiplugin.ValidationError of OptionDefinition: the
// file, the rule it breaks and the fix.
func LoadDefinition(path string) (*Definition, error) {
	return loadDefinition(path, string(OptionDefinition))
}

// loadDefinition is LoadDefinition with the input called what in errors.
func loadDefinition(path, what string) (*Definition, error) {
	bad := func(rule, fix string) error {
		return &csiplugin.ValidationError{What: what, Value: path, Rule: rule, Fix: fix}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, bad("cannot be read: "+errText(err), "name a test-driver definition file, e.g. a copy of "+ReferenceDefinition)
	}
	d := &Definition{path: path}
	// Case-sensitive, as the suite decodes it: "driverInfo" is not DriverInfo.
	js, err := yaml.YAMLToJSON(data)
	if err == nil {
		err = json.Unmarshal(js, d)
	}
	if err != nil {
		return nil, bad("is not a test-driver definition: "+errText(err),
			"write the YAML or JSON of Kubernetes' storage/external driverDefinition, e.g. a copy of "+ReferenceDefinition)
	}
	if d.DriverInfo.Name == "" {
		return nil, bad("DriverInfo.Name is empty (the field names are case-sensitive: DriverInfo, Name)",
			"set DriverInfo.Name to the CSI driver's name (the CSIDriver object's name)")
	}
	if !d.StorageClass.set() && len(d.InlineVolumes) == 0 {
		return nil, bad("claims no volume type, so every spec would skip",
			"add InlineVolumes (CSI ephemeral inline volumes) or a StorageClass (dynamic provisioning)")
	}
	return d, nil
}

// ReferenceDefinition is the reference driver's definition, in the
// csi-registrar repository: the one to copy.
const ReferenceDefinition = "manifests/examples/storage-e2e/stub.csi.example.com.yaml"

// Path is the file the definition was read from.
func (d *Definition) Path() string { return d.path }

// Claims reports whether the definition claims the capability.
func (d *Definition) Claims(capability string) bool { return d.DriverInfo.Capabilities[capability] }

// Focus is the ginkgo focus that selects the External storage specs of the
// volume types the definition claims: with a StorageClass every pattern
// of the driver (the suite skips the ones a definition cannot serve, and
// says so), with inline volumes only, the CSI ephemeral volume pattern.
func (d *Definition) Focus() string {
	f := `External Storage \[Driver: ` + regexp.QuoteMeta(d.DriverInfo.Name) + `\]`
	if !d.StorageClass.set() {
		f += `.*\[Testpattern: CSI Ephemeral-volume `
	}
	return f
}

// ClaimedVolumeTypes names the volume types the definition claims, for the report.
func (d *Definition) ClaimedVolumeTypes() []string {
	var t []string
	if d.StorageClass.set() {
		t = append(t, "DynamicPV", "GenericEphemeralVolume")
	}
	if len(d.InlineVolumes) > 0 {
		t = append(t, "CSIInlineVolume")
	}
	return t
}

// ClaimedCapabilities lists the capabilities set to true, sorted.
func (d *Definition) ClaimedCapabilities() []string {
	var c []string
	for k, v := range d.DriverInfo.Capabilities {
		if v {
			c = append(c, k)
		}
	}
	sort.Strings(c)
	return c
}

// String is a one-line summary: driver, volume types, capabilities.
func (d *Definition) String() string {
	return fmt.Sprintf("driver %s, volume types [%s], capabilities [%s]", d.DriverInfo.Name,
		strings.Join(d.ClaimedVolumeTypes(), " "), strings.Join(d.ClaimedCapabilities(), " "))
}
