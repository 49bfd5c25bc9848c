package testwait_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/testwait"
)

func TestExit(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := testwait.Exit(ctx, cmd.Process.Pid); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exit of a running process = %v, want the deadline", err)
	}
	cmd.Process.Kill()
	// Not reaped yet (a zombie): ended all the same.
	if err := testwait.Exit(context.Background(), cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
}

func TestUntil(t *testing.T) {
	n := 0
	if err := testwait.Until(context.Background(), time.Millisecond, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Errorf("Until = %v after %d checks, want nil after 3", err, n)
	}
}
