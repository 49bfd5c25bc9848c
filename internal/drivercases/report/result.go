// Package report holds what a run of the driver registration cases found
// and writes it out: the results (Result, CaseResult, NodeRollout,
// Leftover), the side-by-side table, the leftovers with their cleanup, and
// the comparison with an expectation file. It is a leaf: no cluster, no
// case runs here; package drivercases fills the results, verify prints them.
package report

import (
	"cmp"
	"fmt"
	"strings"
)

// CaseResult is the outcome of one case.
type CaseResult struct {
	Case     string
	Verdict  string // pass, FAIL, skip; measured: figures reported, not judged (the rollout without the mode); VerdictNotChecked, VerdictNotJudged
	Note     string
	Restarts map[string]int32 // container -> restarts during the case, summed over the workload's pods
	Times    []CaseTime
	// Rollout are the rollout case's figures by node; Mounts says whether
	// it started pods with an inline volume (otherwise it measured the
	// registration only).
	Rollout []NodeRollout
	Mounts  bool
	// Findings are the messages of its failures: the causes in the
	// driver's terms, and the fix.
	Findings []string
}

// CaseTime is a time a case measured, from its fault.
type CaseTime struct {
	What    string
	Seconds float64
}

// Result is one run: one driver with one registrar.
type Result struct {
	Driver     string // the manifests, as given
	Registrar  string // the registrar image under test (or "in-process")
	Kubernetes string
	Provider   string
	Cases      []CaseResult
	// Left is what the driver left on the nodes (mounts, volume
	// directories of pods that are gone), found after each case.
	Left []Leftover
}

// Passed reports whether every case passed (a case whose figures are
// measured, or that cannot judge this driver, does not fail) and nothing
// was left on the node.
func (r Result) Passed() bool {
	for _, c := range r.Cases {
		if c.Verdict != "pass" && c.Verdict != VerdictMeasured && c.Verdict != VerdictNotJudged {
			return false
		}
	}
	return len(r.Cases) > 0 && len(r.Left) == 0
}

// NotChecked reports whether verify could not check a case (its own
// error, VerdictNotChecked).
func (r Result) NotChecked() bool {
	for _, c := range r.Cases {
		if c.Verdict == VerdictNotChecked {
			return true
		}
	}
	return false
}

// Failed reports whether a case failed on the driver's account or the
// driver left something on the node (not: verify could not check).
func (r Result) Failed() bool {
	for _, c := range r.Cases {
		if c.Verdict == "FAIL" {
			return true
		}
	}
	return len(r.Left) > 0
}

// The verdicts besides pass, FAIL and skip.
const (
	// VerdictMeasured: the rollout case's figures are reported, not judged
	// (the rollout without the rolling-update mode).
	VerdictMeasured = "measured"
	// VerdictNotChecked: verify's own means (its exec on the node, its API
	// connection) failed within the case's bound; nothing is said about
	// the driver.
	VerdictNotChecked = "could not check"
	// VerdictNotJudged: the case cannot judge this driver (no inline
	// volume verify can create, no dialable socket); its note says what
	// verify would need. Never pass.
	VerdictNotJudged = "not judged"
)

// NodeRollout is what the rollout case measured on one node.
type NodeRollout struct {
	Node string
	// Unregistered is how long the driver was unregistered on the node
	// (its CSINode entry or its Node annotation key absent), in seconds,
	// from the rollout's start to the end of the window; Gaps the number of
	// such spans; NotBack: still unregistered at the end.
	Unregistered float64
	Gaps         int
	NotBack      bool
	// Moved: the workload's pod left this node in the rollout (a
	// Deployment's new pod landed elsewhere): its registration here ends.
	Moved bool
	// The inline-volume pods started on the node during the rollout:
	// FailedMount events of theirs (the kubelet's retries counted) and those
	// that never ran.
	Started, FailedMounts, NeverRan int
	// WatchBroke: a recorder's watch ended in the window, so a gap may
	// have been missed.
	WatchBroke string
}

// Leftover is a volume of the driver on a node whose pod is gone: the
// kubelet's volume directory of it, mounted or not. The kubelet removes
// both once NodeUnpublishVolume succeeded; a leftover is what a driver that
// could not unpublish (or was uninstalled first) left behind.
type Leftover struct {
	Node   string
	Case   string // the case after which it was found
	PodUID string
	// Dir is the kubelet's directory of the volume:
	// <kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<volume>.
	Dir          string
	Mounted      bool   // Dir/mount is a mount point on the node
	VolumeHandle string // the driver's volume ID (vol_data.json)
}

// Cleanup returns the commands that remove it, to run as root on the node:
// the unmount (if mounted), then the directory without -r (a mount still
// there makes rmdir fail rather than delete the volume's data). The
// kubelet removes the emptied pod directory itself.
func (l Leftover) Cleanup() []string {
	var c []string
	if l.Mounted {
		c = append(c, "umount "+shellQuote(l.Dir+"/mount"))
	}
	c = append(c, "rmdir "+shellQuote(l.Dir+"/mount")+" 2>/dev/null; rm -f "+shellQuote(l.Dir+"/vol_data.json")+" && rmdir "+shellQuote(l.Dir))
	return c
}

func (l Leftover) String() string {
	m := "not mounted"
	if l.Mounted {
		m = "mounted"
	}
	return fmt.Sprintf("node %s: %s (%s; volume %s of pod %s, which is gone; found after %s)", l.Node, l.Dir, m, cmp.Or(l.VolumeHandle, "-"), l.PodUID, l.Case)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
