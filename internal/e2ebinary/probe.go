package e2ebinary

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// BinaryVersion runs `path --version` and returns what it printed: an e2e
// test binary prints the Kubernetes version it was built at (v1.37.2;
// v0.0.0-master+$Format:%H$ when built without the version stamped). The
// error is a *BinaryError when path does not run as one.
func BinaryVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// TMPDIR: the framework writes temporary kuberc files at start-up.
	tmp, err := os.MkdirTemp("", "e2e-version-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := strings.TrimSpace(out.String())
	first, _, _ := strings.Cut(text, "\n")
	switch {
	case err != nil:
		return "", &BinaryError{Path: path, Err: err, Output: lastLines(text, 3)}
	case !strings.HasPrefix(first, "v") || strings.ContainsAny(first, " \t"):
		return "", &BinaryError{Path: path, Err: errors.New("its --version printed no version"), Output: lastLines(text, 3)}
	}
	return first, nil
}

// lastLines is the last n non-empty lines of s on one line, " | " between.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// BinaryError is a file that does not run as an e2e test binary.
type BinaryError struct {
	Path   string
	Err    error
	Output string // what it printed: its last lines, " | " between
}

func (e *BinaryError) Error() string {
	msg := fmt.Sprintf("%s --version: %v", e.Path, e.Err)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

func (e *BinaryError) Unwrap() error { return e.Err }
