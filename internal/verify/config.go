package verify

import (
	"errors"
	"os"
	"strconv"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Validate checks the configuration once, as the command's flags set it,
// and reads what it names (the --expect file into Expect). An error is a
// *csiplugin.ValidationError naming the flag, the value, the rule and the
// fix.
func (c *Config) Validate() error {
	if !c.Cleanup && len(c.Files) == 0 {
		return &csiplugin.ValidationError{What: "-f", Value: "", Rule: "must be given: the driver's manifests (a kustomize directory or a manifest file)",
			Fix: "pass -f DIR|FILE, or --cleanup"}
	}
	switch c.RegistrarLogs {
	case "", "keep":
	case "blocked":
		c.BlockRegistrarLogs = true
	default:
		return &csiplugin.ValidationError{What: "--registrar-logs", Value: c.RegistrarLogs, Rule: "must be keep or blocked",
			Fix: "pass keep (the default) or blocked"}
	}
	if c.RegistrarImage == "" {
		return &csiplugin.ValidationError{What: "--registrar-image", Value: "", Rule: "must not be empty",
			Fix: "name the csi-registrar image the nodes can run, e.g. csi-registrar:dev"}
	}
	if err := drivercases.CheckCases(c.Cases); err != nil {
		return asFlag(err, "--case")
	}
	if c.ExpectFile != "" {
		const format = "a file of lines <driver> <case> <verdict> <text>"
		b, err := os.ReadFile(c.ExpectFile)
		if err != nil {
			return &csiplugin.ValidationError{What: "--expect", Value: c.ExpectFile, Rule: "cannot be read: " + err.Error(), Fix: "name " + format}
		}
		if c.Expect, err = drivercases.ParseExpectations(string(b)); err != nil {
			return &csiplugin.ValidationError{What: "--expect", Value: c.ExpectFile, Rule: err.Error(), Fix: "write " + format}
		}
		if c.Expect == nil {
			c.Expect = []report.Expectation{}
		}
	}
	if c.Rollouts < 1 {
		return &csiplugin.ValidationError{What: "--rollouts", Value: strconv.Itoa(c.Rollouts),
			Rule: "must be at least 1 (the rollouts of case " + drivercases.CaseRolloutsWithFaults + ")", Fix: "use e.g. 10"}
	}
	if c.AllNodes && len(c.Nodes) > 0 {
		return &csiplugin.ValidationError{What: "--all-nodes", Value: "true", Rule: "excludes --node", Fix: "pass one of the two"}
	}
	return nil
}

// asFlag is err's *csiplugin.ValidationError with the input called flag.
func asFlag(err error, flag string) error {
	var ve *csiplugin.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	named := *ve
	named.What = flag
	return &named
}
