package storagee2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Spec is one It of the suite's report.
type Spec struct {
	// Name is the full text: the containers' texts and the It's, joined by
	// spaces, as ginkgo prints it.
	Name  string
	State string // passed, skipped, failed, panicked, timedout, interrupted, aborted, pending
	// Message is the skip or failure message; empty for a spec that the
	// focus left out (ginkgo reports it as skipped too).
	Message string
	RunTime time.Duration
}

// Ran reports whether the spec was selected by the focus (and so ran, or
// skipped itself at run time).
func (s Spec) Ran() bool { return !(s.State == "skipped" && s.Message == "") && s.State != "pending" }

// ginkgo's JSON report (--ginkgo.json-report): a list of suite reports.
type suiteReport struct {
	SuiteDescription string
	SpecReports      []struct {
		ContainerHierarchyTexts []string
		LeafNodeType            string
		LeafNodeText            string
		State                   string
		RunTime                 time.Duration
		Failure                 struct{ Message string }
	}
}

// ParseReport reads ginkgo's JSON report and returns its Its (suite nodes,
// such as SynchronizedBeforeSuite, are returned as failed specs when they
// failed, so that a broken setup is not counted as nothing).
func ParseReport(r io.Reader) ([]Spec, error) {
	var suites []suiteReport
	if err := json.NewDecoder(r).Decode(&suites); err != nil {
		return nil, fmt.Errorf("ginkgo JSON report: %w", err)
	}
	var specs []Spec
	for _, s := range suites {
		for _, sr := range s.SpecReports {
			if sr.LeafNodeType != "It" {
				if sr.State != "passed" && sr.State != "skipped" {
					specs = append(specs, Spec{Name: sr.LeafNodeType, State: sr.State, Message: sr.Failure.Message, RunTime: sr.RunTime})
				}
				continue
			}
			name := strings.Join(append(append([]string{}, sr.ContainerHierarchyTexts...), sr.LeafNodeText), " ")
			specs = append(specs, Spec{Name: name, State: sr.State, Message: strings.TrimSpace(sr.Failure.Message), RunTime: sr.RunTime})
		}
	}
	return specs, nil
}

// ReadReport is ParseReport on a file.
func ReadReport(path string) ([]Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseReport(f)
}

// skipRule explains one kind of run-time skip by the definition: why names
// what the definition does not claim, and ok is false when the definition
// does claim it (the skip then contradicts the definition).
type skipRule struct {
	re      *regexp.Regexp
	explain func(d *Definition, m []string) (why string, ok bool)
}

// capabilityPhrases maps the words of the suite's "Driver X does not support
// ..." messages to the capability (DriverInfo.Capabilities key) they stand for.
var capabilityPhrases = map[string]string{
	"online volume expansion":       "onlineExpansion",
	"volume expansion":              "controllerExpansion",
	"populating data from snapshot": "snapshotDataSource",
	"cloning":                       "pvcDataSource",
	"multiple concurrent pods":      "multipods",
	"ROX access mode":               "capReadOnlyMany",
	"block volume mode":             "block",
	"raw block":                     "block",
	"FsGroup":                       "fsGroup",
	"topology":                      "topology",
	"volume limits":                 "volumeLimits",
	"ReadWriteOncePod":              "readWriteOncePod",
	"SELinuxMount":                  "seLinuxMount",
	"snapshot metadata":             "snapshotMetadata",
	"group snapshots":               "groupSnapshot",
	"RWX":                           "RWX",
	"storage capacity":              "capacity",
	"reconstruction":                "persistence",
	"multiple PVs with the same volumeHandle": "multiplePVsSameID",
	"Block": "block",
}

func notClaimed(c string) func(d *Definition, _ []string) (string, bool) {
	return func(d *Definition, _ []string) (string, bool) {
		if d.Claims(c) {
			return fmt.Sprintf("capability %s is claimed, yet the suite skipped for the lack of it", c), false
		}
		return "capability " + c + " not claimed", true
	}
}

func classNotSet(field string, get func(d *Definition) classSource) func(d *Definition, _ []string) (string, bool) {
	return func(d *Definition, _ []string) (string, bool) {
		if get(d).set() {
			return field + " is set, yet the suite skipped for the lack of it", false
		}
		return field + " not set", true
	}
}

// volumeTypeClaim explains a skip for a volume type (pattern) the definition
// does not claim.
func volumeTypeClaim(d *Definition, m []string) (string, bool) {
	t := m[1]
	switch t {
	case "DynamicPV", "GenericEphemeralVolume":
		if d.StorageClass.set() {
			return "volume type " + t + " is claimed (StorageClass), yet skipped", false
		}
		return "volume type " + t + " not claimed (no StorageClass)", true
	case "CSIInlineVolume":
		if len(d.InlineVolumes) > 0 {
			return "volume type " + t + " is claimed (InlineVolumes), yet skipped", false
		}
		return "volume type " + t + " not claimed (no InlineVolumes)", true
	}
	return "volume type " + t + " cannot be claimed by a definition file (the External suite tests DynamicPV, GenericEphemeralVolume and CSIInlineVolume)", true
}

var skipRules = []skipRule{
	{regexp.MustCompile(`does not support volume type "?(\w+)"?`), volumeTypeClaim},
	{regexp.MustCompile(`^Driver \S+ doesn't support (\w+(?:PV|Volume))\b`), volumeTypeClaim},
	{regexp.MustCompile(`^Skipping (\w+) test for expansion`), func(d *Definition, m []string) (string, bool) {
		if m[1] == "GenericEphemeralVolume" {
			return "expansion skipped for a generic ephemeral volume", false
		}
		return "expansion is of a PVC: volume type " + m[1] + " has none (capability onlineExpansion applies to StorageClass volumes)", true
	}},
	{regexp.MustCompile(`does not define Dynamic Provision StorageClass|does not support dynamic provisioning|does not support dynamically created volumes`),
		classNotSet("StorageClass", func(d *Definition) classSource { return d.StorageClass })},
	{regexp.MustCompile(`does not support (snapshots|snapshotting)`),
		classNotSet("SnapshotClass", func(d *Definition) classSource { return d.SnapshotClass })},
	{regexp.MustCompile(`does not support groupsnapshotting`),
		classNotSet("GroupSnapshotClass", func(d *Definition) classSource { return d.GroupSnapshotClass })},
	{regexp.MustCompile(`VolumeAttributesClass`),
		classNotSet("VolumeAttributesClass", func(d *Definition) classSource { return d.VolumeAttributesClass })},
	{regexp.MustCompile(`^inline ephemeral volume #(\d+) is read-only`), func(d *Definition, m []string) (string, bool) {
		// The suite uses InlineVolumes[i % len] for volume #i.
		var i int
		if _, err := fmt.Sscan(m[1], &i); err != nil || len(d.InlineVolumes) == 0 {
			return "", false
		}
		k := fmt.Sprintf("InlineVolumes[%d]", i%len(d.InlineVolumes))
		if d.InlineVolumes[i%len(d.InlineVolumes)].ReadOnly {
			return k + " is ReadOnly: read/write not claimed", true
		}
		return k + " is not ReadOnly, yet skipped as read-only", false
	}},
	{regexp.MustCompile(`^raw block volumes cannot be read-only`), notClaimed("block")},
	{regexp.MustCompile(`VolumeBindingMode immediate is not compatible with a multi-topology environment`), func(d *Definition, _ []string) (string, bool) {
		if len(d.DriverInfo.TopologyKeys) == 0 {
			return "no TopologyKeys, yet skipped for topology", false
		}
		return "TopologyKeys set: immediate binding not tested", true
	}},
	{regexp.MustCompile(`does not support "?([^" ]*)"? fs type`), func(_ *Definition, m []string) (string, bool) {
		return "fs type " + m[1] + " not in DriverInfo.SupportedFsType", true
	}},
	{regexp.MustCompile(`^Driver \S+ doesn't support (ext\d|xfs|ntfs)\b`), func(_ *Definition, m []string) (string, bool) {
		return "fs type " + m[1] + " not in DriverInfo.SupportedFsType", true
	}},
	{regexp.MustCompile(`doesn't specify (.*)test options`), func(_ *Definition, m []string) (string, bool) {
		return strings.TrimSpace(m[1]) + " test options not in DriverInfo", true
	}},
	{regexp.MustCompile(`^Driver \S+ only supports singleNodeVolume`), func(d *Definition, _ []string) (string, bool) {
		if !d.Claims("singleNodeVolume") {
			return "skipped as singleNodeVolume, which is not claimed", false
		}
		return "capability singleNodeVolume claimed: multi-node specs do not apply", true
	}},
	// Last: the generic "Driver X does not support / doesn't support / does
	// not provide PHRASE" form, the phrase mapped to a capability.
	{regexp.MustCompile(`(?:does not|doesn't) (?:support|provide|publish) (.+?)(?: -+ ?skipping)?$`), func(d *Definition, m []string) (string, bool) {
		phrase := strings.TrimSuffix(strings.TrimSpace(m[1]), ",")
		for p, c := range capabilityPhrases {
			if strings.EqualFold(p, phrase) || strings.EqualFold(p, strings.TrimPrefix(phrase, "a ")) {
				return notClaimed(c)(d, nil)
			}
		}
		return "", false
	}},
}

// ExplainSkip explains a run-time skip message by the definition. ok is
// false when no rule knows the message, or when the definition claims what
// the suite skipped for.
func ExplainSkip(d *Definition, message string) (why string, ok bool) {
	msg := strings.TrimSpace(message)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	for _, r := range skipRules {
		if m := r.re.FindStringSubmatch(msg); m != nil {
			return r.explain(d, m)
		}
	}
	return "", false
}

// Result is a judged run.
type Result struct {
	Passed, Failed, Skipped []Spec // Skipped: run-time skips only
	NotSelected             int    // left out by the focus
	// Explained maps a skipped spec's name to the reason; Unexplained lists
	// the skipped specs no rule explains (or whose reason the definition
	// contradicts), each with the suite's message.
	Explained   map[string]string
	Unexplained []string
	// Missing lists the expected specs that did not pass.
	Missing []string
	// Focus is the ginkgo focus the run selected the specs with.
	Focus string
}

// Judge sorts the specs and checks them against the definition and, when
// expected is not nil, against the list of specs expected to pass.
func Judge(d *Definition, specs []Spec, expected []string) Result {
	r := Result{Explained: map[string]string{}}
	passed := map[string]bool{}
	for _, s := range specs {
		switch {
		case !s.Ran():
			r.NotSelected++
		case s.State == "passed":
			r.Passed = append(r.Passed, s)
			passed[s.Name] = true
		case s.State == "skipped":
			r.Skipped = append(r.Skipped, s)
			if why, ok := ExplainSkip(d, s.Message); ok {
				r.Explained[s.Name] = why
			} else {
				if why == "" {
					why = "no rule explains it by the definition"
				}
				r.Unexplained = append(r.Unexplained, fmt.Sprintf("%s: %q: %s", s.Name, s.Message, why))
			}
		default:
			r.Failed = append(r.Failed, s)
		}
	}
	for _, e := range expected {
		if !passed[e] {
			r.Missing = append(r.Missing, e)
		}
	}
	sort.Strings(r.Missing)
	return r
}

// OK is the verdict: nothing failed, every skip explained, every expected spec passed.
func (r Result) OK() bool {
	return len(r.Failed) == 0 && len(r.Unexplained) == 0 && len(r.Missing) == 0
}

// Write prints the result: every spec that ran with its outcome, the skips
// with their reasons, and the counts.
func (r Result) Write(w io.Writer) {
	for _, s := range r.Passed {
		fmt.Fprintf(w, "  passed   %6.1fs  %s\n", s.RunTime.Seconds(), s.Name)
	}
	for _, s := range r.Skipped {
		why, ok := r.Explained[s.Name]
		if !ok {
			why = "NOT EXPLAINED: " + s.Message
		}
		fmt.Fprintf(w, "  skipped  %6.1fs  %s\n                    (%s)\n", s.RunTime.Seconds(), s.Name, why)
	}
	for _, s := range r.Failed {
		msg := s.Message
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		fmt.Fprintf(w, "  %-8s %6.1fs  %s\n                    %s\n", s.State, s.RunTime.Seconds(), s.Name, msg)
	}
	fmt.Fprintf(w, "passed %d, skipped %d (every skip explained: %v), failed %d; not selected by the focus: %d\n",
		len(r.Passed), len(r.Skipped), len(r.Unexplained) == 0, len(r.Failed), r.NotSelected)
	for _, u := range r.Unexplained {
		fmt.Fprintf(w, "unexplained skip: %s\n", u)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "expected to pass, did not: %s\n", m)
	}
}

// ReadExpected reads a list of spec names, one a line; blank lines and
// lines starting with # are ignored.
func ReadExpected(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("expected-pass list: %w", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		names = append(names, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("expected-pass list %s: %w", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("expected-pass list %s names no spec: list the specs that must pass, one a line", path)
	}
	return names, nil
}
