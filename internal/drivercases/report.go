package drivercases

import "github.com/csi-registrar/csi-registrar/internal/drivercases/report"

// The results a run returns are package report's (a leaf: how they are
// judged overall and written out lives there); these names let the cases
// and their callers say them without the package name.
type (
	Result      = report.Result
	CaseResult  = report.CaseResult
	CaseTime    = report.CaseTime
	NodeRollout = report.NodeRollout
	Leftover    = report.Leftover
	Expectation = report.Expectation
)

// The verdicts besides pass, FAIL and skip (report's).
const (
	verdictMeasured   = report.VerdictMeasured
	VerdictNotChecked = report.VerdictNotChecked
	VerdictNotJudged  = report.VerdictNotJudged
	// LeftOnTheNode is the case name of an expectation on what the driver
	// left on the node (Verdict: how many volumes).
	LeftOnTheNode = report.LeftOnTheNode
)
