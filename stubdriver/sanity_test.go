package stubdriver_test

import (
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"

	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// csi-sanity's spec selection for a node-only driver. Controller specs are not
// skipped by capability, so only the Identity and Node services are focused.
const (
	sanityFocus = `Identity Service|Node Service`
	// "should remove target path" and NodeGetVolumeStats' "should fail when
	// volume does not exist on the specified path" create a volume with the
	// controller's CreateVolume first; a node-only driver has no controller
	// service (TestVolumeStats covers the latter with a published volume).
	sanitySkip = `should remove target path|should fail when volume does not exist on the specified path`
)

// sanityMustPass lists the specs that must have run and passed against every
// driver configuration, so that a typo in the focus, or csi-sanity skipping a
// spec, cannot make TestSanity pass without testing anything.
var sanityMustPass = []string{
	"Identity Service GetPluginCapabilities should return appropriate capabilities",
	"Identity Service Probe should return appropriate information",
	"Identity Service GetPluginInfo should return appropriate information",
	"Node Service NodeGetCapabilities should return appropriate capabilities",
	"Node Service NodeGetInfo should return appropriate values",
	"Node Service NodePublishVolume should fail when no volume id is provided",
	"Node Service NodePublishVolume should fail when no target path is provided",
	"Node Service NodePublishVolume should fail when no volume capability is provided",
	"Node Service NodeUnpublishVolume should fail when no volume id is provided",
	"Node Service NodeUnpublishVolume should fail when no target path is provided",
	"Node Service NodeGetVolumeStats should fail when no volume id is provided",
	"Node Service NodeGetVolumeStats should fail when no volume path is provided",
	"Node Service NodeGetVolumeStats should fail when volume is not found",
}

// sanitySkipped lists the focused specs csi-sanity itself skips for this
// driver, and why. A focused spec skipped for any other reason fails the test.
var sanitySkipped = map[string]string{
	// Needs CreateVolume (excluded by sanitySkip, see above).
	"Node Service NodeUnpublishVolume should remove target path": "needs a controller (CreateVolume)",
	// csi-sanity calls Skip at run time when the plugin has no CONTROLLER_SERVICE.
	"Node Service should work":          "no controller service",
	"Node Service should be idempotent": "no controller service",
	// csi-sanity skips these by node capability; the stub advertises none.
	"Node Service NodePublishVolume with single node multi writer capability should fail when volume with single node single writer access mode is already mounted at a different target path": "no SINGLE_NODE_MULTI_WRITER",
	"Node Service NodeStageVolume should fail when no volume id is provided":                       "no STAGE_UNSTAGE_VOLUME",
	"Node Service NodeStageVolume should fail when no staging target path is provided":             "no STAGE_UNSTAGE_VOLUME",
	"Node Service NodeStageVolume should fail when no volume capability is provided":               "no STAGE_UNSTAGE_VOLUME",
	"Node Service NodeUnstageVolume should fail when no volume id is provided":                     "no STAGE_UNSTAGE_VOLUME",
	"Node Service NodeUnstageVolume should fail when no staging target path is provided":           "no STAGE_UNSTAGE_VOLUME",
	"Node Service NodeGetVolumeStats should fail when volume does not exist on the specified path": "needs a controller (CreateVolume)",
	"Node Service NodeExpandVolume should fail when no volume id is provided":                      "no EXPAND_VOLUME",
	"Node Service NodeExpandVolume should fail when no volume path is provided":                    "no EXPAND_VOLUME",
	"Node Service NodeExpandVolume should fail when volume is not found":                           "no EXPAND_VOLUME",
	"Node Service NodeExpandVolume should work if node-expand is called after node-publish":        "no EXPAND_VOLUME",
	"Node Service NodeGetVolumeHealth should fail when no volume id is provided":                   "no GET_VOLUME_HEALTH",
	"Node Service NodeGetVolumeHealth should return health for a valid volume":                     "no GET_VOLUME_HEALTH",
	"Node Service NodeGetStorageHealth should return appropriate response":                         "no GET_STORAGE_HEALTH",
}

// ginkgoRefusal returns the go test flag, if any, with which ginkgo would exit
// the whole test process instead of running its suite: -count other than 1
// (ginkgo runs one suite per process) or -parallel.
func ginkgoRefusal() string {
	var refused string
	flag.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "test.count" && f.Value.String() != "1":
			refused = "-count=" + f.Value.String()
		case f.Name == "test.parallel":
			refused = "-parallel"
		}
	})
	return refused
}

// TestSanity runs csi-sanity's Identity and Node specs against two drivers
// that publish ephemeral volumes (a state directory is set), one without and
// one with a topology (VOLUME_ACCESSIBILITY_CONSTRAINTS, which
// makes csi-sanity require NodeGetInfo's accessible_topology), and checks the
// ginkgo report: no failure, every spec in sanityMustPass passed, and no
// focused spec skipped without a reason in sanitySkipped.
func TestSanity(t *testing.T) {
	if f := ginkgoRefusal(); f != "" {
		t.Skipf("ginkgo cannot run csi-sanity under go test %s; run go test -count=1 -run TestSanity", f)
	}

	drivers := []struct {
		label string
		opts  stubdriver.Options
	}{
		{"plain driver", stubdriver.Options{VendorVersion: "v0.0.0-test"}},
		{"driver with topology", stubdriver.Options{VendorVersion: "v0.0.0-test",
			Topology: map[string]string{"topology.stub.csi.example.com/zone": "zone-a"}}},
	}
	var contexts []*sanity.TestContext
	for _, d := range drivers {
		// With a state directory: publishing is live, as in the DaemonSet.
		d.opts.StateDir = filepath.Join(t.TempDir(), "state")
		drv := startDriver(t, d.opts)
		cfg := sanity.NewTestConfig()
		cfg.Address = "unix://" + drv.path
		// csi-sanity creates these before and removes them after every spec;
		// their parent must exist, they must not.
		dir := t.TempDir()
		cfg.TargetPath = filepath.Join(dir, "target")
		cfg.StagingPath = filepath.Join(dir, "staging")
		ginkgo.Describe(d.label, func() { contexts = append(contexts, sanity.GinkgoTest(&cfg)) })
	}
	var report types.Report
	ginkgo.ReportAfterSuite("capture the report", func(r types.Report) { report = r })

	gomega.RegisterFailHandler(ginkgo.Fail)
	suiteCfg, reporterCfg := ginkgo.GinkgoConfiguration()
	suiteCfg.FocusStrings = []string{sanityFocus}
	suiteCfg.SkipStrings = []string{sanitySkip}
	reporterCfg.NoColor = true // go test output is usually read as plain text
	ginkgo.RunSpecs(t, "csi-sanity against stubdriver", suiteCfg, reporterCfg)
	for _, sc := range contexts {
		sc.Finalize()
	}

	if len(report.SpecReports) == 0 {
		t.Fatal("the ginkgo report is empty: ReportAfterSuite did not run")
	}
	state := map[string]types.SpecState{}
	var ran, passed, skipped, filtered int
	for _, sr := range report.SpecReports {
		if sr.LeafNodeType != types.NodeTypeIt {
			continue // suite-level nodes such as ReportAfterSuite
		}
		name := sr.FullText()
		state[name] = sr.State
		focused := strings.Contains(name, "Identity Service") || strings.Contains(name, "Node Service")
		switch {
		case sr.State.Is(types.SpecStateFailureStates):
			ran++
			t.Errorf("csi-sanity spec %q: %s\n%s", name, sr.State, sr.Failure.Message)
		case sr.State == types.SpecStatePassed:
			ran++
			passed++
		case !focused && (sr.State == types.SpecStateSkipped || sr.State == types.SpecStatePending):
			filtered++ // controller, snapshot and group controller specs; some are pending upstream
		case sr.State == types.SpecStateSkipped:
			skipped++
			_, label, _ := strings.Cut(name, " Node Service ")
			if _, ok := sanitySkipped["Node Service "+label]; !ok {
				t.Errorf("csi-sanity skipped %q without a documented reason: %s", name, sr.Failure.Message)
			}
		default:
			t.Errorf("csi-sanity spec %q ended in state %s", name, sr.State)
		}
	}
	for _, d := range drivers {
		for _, spec := range sanityMustPass {
			name := d.label + " " + spec
			if st, ok := state[name]; !ok {
				t.Errorf("csi-sanity spec %q is not in the report (renamed upstream, or the focus is wrong?)", name)
			} else if st != types.SpecStatePassed {
				t.Errorf("csi-sanity spec %q: %s, want passed", name, st)
			}
		}
	}
	if !report.SuiteSucceeded {
		t.Errorf("csi-sanity suite failed: %v", report.SpecialSuiteFailureReasons)
	}
	t.Logf("csi-sanity: %d specs ran, %d passed, %d skipped by csi-sanity or %q, %d filtered out by the focus",
		ran, passed, skipped, sanitySkip, filtered)
	if !slices.Contains(report.SuiteConfig.FocusStrings, sanityFocus) {
		t.Errorf("suite focus = %q, want %q", report.SuiteConfig.FocusStrings, sanityFocus)
	}
}
