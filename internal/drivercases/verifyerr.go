package drivercases

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// VerifyError is an error of verify's own means (its exec into the node
// pod, its connection to the API server), not of the driver under test: a
// case never reports it inside the driver's verdict. A case retries within
// its bound; what it still could not check is its own outcome, "could not
// check" (never pass, never FAIL).
type VerifyError struct{ Err error }

func (e *VerifyError) Error() string { return e.Err.Error() }
func (e *VerifyError) Unwrap() error { return e.Err }

// VerifysOwn reports whether err is verify's own trouble rather than an
// answer about the driver: a VerifyError, or a transport error reaching the
// API server (a dial or a timeout of its URL).
func VerifysOwn(err error) bool {
	if err == nil {
		return false
	}
	var v *VerifyError
	if errors.As(err, &v) {
		return true
	}
	var u *url.Error
	if errors.As(err, &u) {
		return true
	}
	var n net.Error
	if errors.As(err, &n) {
		return true
	}
	// Errors that crossed a process or a stream as text only.
	s := err.Error()
	return strings.Contains(s, "i/o timeout") && strings.Contains(s, "dial tcp")
}

// ownIn returns the first argument that is verify's own error.
func ownIn(args []any) error {
	for _, a := range args {
		if err, ok := a.(error); ok && VerifysOwn(err) {
			return err
		}
	}
	return nil
}
