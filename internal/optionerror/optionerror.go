// Package optionerror is the error the internal libraries return for one
// input that breaks a rule (clusterstatus, storagee2e): the input as a field
// of the library's options, the value, the rule and the fix. A command names
// its own flag instead of the field with Named, so that the message a user
// reads calls the input as they typed it.
package optionerror

import (
	"errors"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Error is the value of input Option breaking a rule. Its message calls the
// input by the option's name (a field, "Options.Driver"); Describe calls it
// by another (a flag, "--driver"). It reads as a *csiplugin.ValidationError.
type Error[O ~string] struct {
	Option O
	Value  string // the value, as given
	Rule   string // the rule it breaks, including any limit
	Fix    string // what the user should do
}

func (e *Error[O]) Error() string { return e.Describe(string(e.Option)) }

// Describe returns the message with the input called name.
func (e *Error[O]) Describe(name string) string {
	return (&csiplugin.ValidationError{What: name, Value: e.Value, Rule: e.Rule, Fix: e.Fix}).Error()
}

// Named returns err with the input of an *Error[O] in it called by its name
// in names (a command's flags), after edit, if given, rewrote the error (a
// library's wording of an option into the flag's); any other error, or an
// input names lacks, is returned as it is.
func Named[O ~string](err error, names map[O]string, edit func(*Error[O])) error {
	var oe *Error[O]
	if !errors.As(err, &oe) {
		return err
	}
	name, ok := names[oe.Option]
	if !ok {
		return err
	}
	e := *oe
	if edit != nil {
		edit(&e)
	}
	return errors.New(e.Describe(name))
}
