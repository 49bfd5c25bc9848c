package verify

import (
	"errors"
	"testing"
)

// A stage's error carries its exit code; Run returns the error as the stage
// made it.
func TestExitCodeOfAStagesError(t *testing.T) {
	plain := errors.New("x")
	refusal := &Refusal{Reasons: []string{"r"}}
	for _, tc := range []struct {
		err  error
		code int
		want error
	}{
		{refused(plain), ExitRefused, plain},
		{incomplete(plain), ExitIncomplete, plain},
		{refusal, ExitRefused, refusal},
		{plain, ExitIncomplete, plain},
	} {
		code, err := exitCode(tc.err)
		if code != tc.code || err != tc.want {
			t.Errorf("exitCode(%v) = %d, %v; want %d, %v", tc.err, code, err, tc.code, tc.want)
		}
	}
}
