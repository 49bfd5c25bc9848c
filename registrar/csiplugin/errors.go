package csiplugin

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxEchoedValue is how many bytes of an invalid value a *ValidationError
// repeats: a driver may report a name of any length, and the error ends up
// in a log line. It is more than the longest value any rule here accepts
// (a label key of 317 bytes, a socket path of 107), so a value just over a
// limit is shown whole.
const MaxEchoedValue = 512

// ValidationError reports input that breaks a rule. It names the value, the
// rule and how to fix it. Nothing is created or removed when it is returned.
type ValidationError struct {
	What  string // what was checked, e.g. "driver name"
	Value string // the offending value, as given
	Rule  string // the rule it breaks, including any limit
	Fix   string // what the user should do
}

func (e *ValidationError) Error() string {
	msg := fmt.Sprintf("invalid %s %s: %s", e.What, Echo(e.Value), e.Rule)
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// Echo quotes v for an error or a log line, cut to its first
// MaxEchoedValue bytes (at a character boundary) with the full length after
// it: "\"aaa…\"… (1048576 bytes)".
func Echo(v string) string {
	if len(v) <= MaxEchoedValue {
		return strconv.Quote(v)
	}
	cut := MaxEchoedValue
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}

// IsValidationError reports whether err is, or wraps, a *ValidationError.
func IsValidationError(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}
