package optionerror

import (
	"fmt"
	"strings"
	"testing"
)

type option string

func TestNamed(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &Error[option]{Option: "Options.Timeout", Value: "5s", Rule: "must be at least 1m", Fix: "pass a longer --timeout"})
	if got := err.Error(); !strings.Contains(got, "Options.Timeout") || !strings.Contains(got, `"5s"`) {
		t.Errorf("library message %q: want the field and the value", got)
	}
	got := Named(err, map[option]string{"Options.Timeout": "--timeout"}, nil).Error()
	if !strings.Contains(got, "--timeout") || strings.Contains(got, "Options.") || !strings.Contains(got, "must be at least 1m") {
		t.Errorf("named message %q: want the flag, the rule, no field", got)
	}
	edited := Named(err, map[option]string{"Options.Timeout": "--timeout"}, func(e *Error[option]) { e.Rule = "edited" }).Error()
	if !strings.Contains(edited, "edited") {
		t.Errorf("edit not applied: %q", edited)
	}
	if other := Named(err, map[option]string{"Options.Other": "--other"}, nil); other != err {
		t.Errorf("an input the names lack: got %v, want the error unchanged", other)
	}
	plain := fmt.Errorf("plain")
	if got := Named(plain, map[option]string{"Options.Timeout": "--timeout"}, nil); got != plain {
		t.Errorf("another error: got %v", got)
	}
}
