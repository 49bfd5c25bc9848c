package registrar

import (
	"errors"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// OptionError is an error about the value of one option: the value breaks a
// rule (Err is a *csiplugin.ValidationError, which errors.As and
// csiplugin.IsValidationError find), or acting on it failed (Op says what
// was attempted, Err why it failed). Its message calls the option
// "Options.<Option>"; a program that sets options from flags names the flag
// instead with Describe.
type OptionError struct {
	Option Option // the option, e.g. OptionHTTPEndpoint
	Value  string // its value, as given or as used
	// Op is what was attempted with the value, e.g. "listen on"; empty
	// when the value breaks a rule.
	Op string
	// Path is the file acted on when it is not Value itself, e.g. the
	// directory of a socket.
	Path string
	// Err is the cause: a *csiplugin.ValidationError, a
	// *DriverTimeoutError (of OptionConnectionTimeout), or the error of
	// the system call or library that failed.
	Err error
	Fix string // what to do about it; may be empty
}

func (e *OptionError) Error() string { return e.Describe("Options." + string(e.Option)) }

// Describe returns the message with the option called name, e.g. "--timeout".
func (e *OptionError) Describe(name string) string {
	var ve *csiplugin.ValidationError
	var te *DriverTimeoutError
	var msg string
	switch {
	case e.Op == "" && errors.As(e.Err, &ve):
		named := *ve
		named.What = name
		return named.Error()
	case errors.As(e.Err, &te):
		msg = "the CSI driver at " + te.Address + " did not answer within " + name + "=" + e.Value +
			" (waited " + te.Waited.String() + "): " + errText(te.Err)
	default:
		msg = name
		if e.Value != "" {
			msg += " " + e.Value
		}
		if e.Op != "" {
			msg = e.Op + " " + msg
		}
		if e.Path != "" {
			msg += " (" + e.Path + ")"
		}
		msg += ": " + errText(e.Err)
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

func (e *OptionError) Unwrap() error { return e.Err }

// DriverTimeoutError is the cause of the *OptionError of
// OptionConnectionTimeout that Run returns when the CSI driver did not
// answer within Options.ConnectionTimeout.
type DriverTimeoutError struct {
	Address string        // the driver's socket path
	Waited  time.Duration // how long Run waited
	Err     error         // why the last attempt failed; nil if none was made
}

func (e *DriverTimeoutError) Error() string {
	return "the CSI driver at " + e.Address + " did not answer (waited " + e.Waited.String() + "): " + errText(e.Err)
}

func (e *DriverTimeoutError) Unwrap() error { return e.Err }

// errText is err's message, or "<nil>" as fmt prints a nil error.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// invalid returns the *OptionError for opt's value v breaking rule.
func invalid(opt Option, v, rule, fix string) *OptionError {
	return &OptionError{Option: opt, Value: v, Err: &csiplugin.ValidationError{What: "Options." + string(opt), Value: v, Rule: rule, Fix: fix}}
}

// ruleOf names opt in err, a *csiplugin.ValidationError of a shared rule.
func ruleOf(opt Option, err error) error {
	var ve *csiplugin.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return &OptionError{Option: opt, Value: ve.Value, Err: ve}
}
