package main

import "github.com/csi-registrar/csi-registrar/registrar"

// badFlag is the error for a flag value that breaks a rule.
func badFlag(name, value, rule, fix string) error {
	return &registrar.ValidationError{What: "--" + name, Value: value, Rule: rule, Fix: fix}
}
