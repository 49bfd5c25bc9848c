package storagee2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExplainSkip(t *testing.T) {
	d, err := LoadDefinition(writeDef(t, inlineDef+"  - ReadOnly: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	claimsExpansion, err := LoadDefinition(writeDef(t, "DriverInfo: {Name: x, Capabilities: {onlineExpansion: true, block: true}}\nStorageClass: {FromName: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d       *Definition
		msg     string
		ok      bool
		mention string
	}{
		// The messages as test/e2e/storage (v1.37) writes them.
		{d, "Skipping CSIInlineVolume test for expansion", true, "onlineExpansion"},
		{d, `Driver "stub.csi.example.com" does not support online volume expansion - skipping`, true, "onlineExpansion"},
		{claimsExpansion, `Driver "x" does not support online volume expansion - skipping`, false, "claimed"},
		{claimsExpansion, "Skipping GenericEphemeralVolume test for expansion", false, ""},
		{d, `Driver "stub.csi.example.com" does not support volume type "DynamicPV" - skipping`, true, "no StorageClass"},
		{claimsExpansion, `Driver "x" does not support volume type "DynamicPV" - skipping`, false, "is claimed"},
		{d, `Driver "stub.csi.example.com" does not support volume type "PreprovisionedPV" - skipping`, true, "cannot be claimed"},
		{d, "Driver stub.csi.example.com doesn't support InlineVolume -- skipping", true, "cannot be claimed"},
		{d, `Driver "stub.csi.example.com" does not support block volume mode - skipping`, true, "block"},
		{claimsExpansion, `Driver "x" does not support block volume mode - skipping`, false, "block"},
		{d, `Driver "stub.csi.example.com" does not support populating data from snapshot - skipping`, true, "snapshotDataSource"},
		{d, `Driver "stub.csi.example.com" does not support snapshotting - skipping`, true, "SnapshotClass"},
		{d, `Driver "stub.csi.example.com" does not define Dynamic Provision StorageClass - skipping`, true, "StorageClass"},
		{d, "inline ephemeral volume #1 is read-only, but the test needs a read/write volume", true, "InlineVolumes[1]"},
		{d, "inline ephemeral volume #2 is read-only, but the test needs a read/write volume", false, "InlineVolumes[0]"},
		{d, "Driver stub.csi.example.com doesn't support RWX -- skipping", true, "RWX"},
		{d, "Only supported for providers [gce gke] (not skeleton)", false, ""},
		{d, "", false, ""},
	} {
		why, ok := ExplainSkip(tc.d, tc.msg)
		if ok != tc.ok || !strings.Contains(why, tc.mention) {
			t.Errorf("ExplainSkip(%q) = %q, %v; want ok %v and a reason mentioning %q", tc.msg, why, ok, tc.ok, tc.mention)
		}
	}
}

// A report as ginkgo writes it (--ginkgo.json-report), trimmed to the fields read.
const sampleReport = `[{"SuiteDescription":"Kubernetes e2e suite","SpecReports":[
 {"LeafNodeType":"SynchronizedBeforeSuite","State":"passed","RunTime":1000000},
 {"ContainerHierarchyTexts":["External Storage [Driver: stub.csi.example.com]","[Testpattern: CSI Ephemeral-volume (default fs)]","ephemeral"],
  "LeafNodeType":"It","LeafNodeText":"should create read-only inline ephemeral volume","State":"passed","RunTime":4000000000,"Failure":{}},
 {"ContainerHierarchyTexts":["External Storage [Driver: stub.csi.example.com]","[Testpattern: CSI Ephemeral-volume (default fs)]","ephemeral"],
  "LeafNodeType":"It","LeafNodeText":"should support expansion of pvcs created for ephemeral pvcs","State":"skipped","RunTime":1000,
  "Failure":{"Message":"Skipping CSIInlineVolume test for expansion","Location":{"FileName":"ephemeral.go","LineNumber":228}}},
 {"ContainerHierarchyTexts":["External Storage [Driver: stub.csi.example.com]","[Testpattern: CSI Ephemeral-volume (default fs)]","ephemeral"],
  "LeafNodeType":"It","LeafNodeText":"should support multiple inline ephemeral volumes","State":"failed","RunTime":1000,
  "Failure":{"Message":"timed out waiting for the condition\nmore"}},
 {"ContainerHierarchyTexts":["[sig-node] Pods"],"LeafNodeType":"It","LeafNodeText":"should be submitted and removed","State":"skipped","Failure":{}}
]}]`

func TestJudge(t *testing.T) {
	specs, err := ParseReport(strings.NewReader(sampleReport))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 4 {
		t.Fatalf("%d specs, want the 4 Its: %+v", len(specs), specs)
	}
	d, err := LoadDefinition(writeDef(t, inlineDef))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "External Storage [Driver: stub.csi.example.com] [Testpattern: CSI Ephemeral-volume (default fs)] ephemeral "
	expected := []string{prefix + "should create read-only inline ephemeral volume", prefix + "should support multiple inline ephemeral volumes"}
	r := Judge(d, specs, expected)
	if len(r.Passed) != 1 || len(r.Skipped) != 1 || len(r.Failed) != 1 || r.NotSelected != 1 {
		t.Errorf("passed %d skipped %d failed %d not selected %d, want 1 1 1 1", len(r.Passed), len(r.Skipped), len(r.Failed), r.NotSelected)
	}
	if len(r.Unexplained) != 0 || len(r.Explained) != 1 {
		t.Errorf("explained %v, unexplained %v", r.Explained, r.Unexplained)
	}
	if len(r.Missing) != 1 || r.Missing[0] != expected[1] {
		t.Errorf("missing %v, want the failed expected spec", r.Missing)
	}
	if r.OK() {
		t.Error("a failed spec judged OK")
	}
	var sb strings.Builder
	r.Write(&sb)
	for _, want := range []string{"passed 1, skipped 1 (every skip explained: true), failed 1; not selected by the focus: 1",
		"timed out waiting for the condition", "expected to pass, did not: " + expected[1]} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, sb.String())
		}
	}

	// A failed suite node (no It ran) is a failure, not an empty green run.
	specs, err = ParseReport(strings.NewReader(`[{"SpecReports":[{"LeafNodeType":"SynchronizedBeforeSuite","State":"failed","Failure":{"Message":"nodes not ready"}}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if r := Judge(d, specs, nil); r.OK() || len(r.Failed) != 1 {
		t.Errorf("a failed BeforeSuite judged %+v", r)
	}
	// An unexplained skip is not green.
	specs = []Spec{{Name: "x", State: "skipped", Message: "Only supported for providers [gce]"}}
	if r := Judge(d, specs, nil); r.OK() || len(r.Unexplained) != 1 {
		t.Errorf("an unexplained skip judged %+v", r)
	}
}

func TestReadExpected(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(p, []byte("# comment\n\n a spec \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadExpected(p)
	if err != nil || len(got) != 1 || got[0] != "a spec" {
		t.Errorf("ReadExpected = %q, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("# only a comment\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadExpected(p); err == nil {
		t.Error("an empty list was accepted")
	}
}
