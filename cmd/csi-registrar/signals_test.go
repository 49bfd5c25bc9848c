package main

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// A first stop signal ends the context (graceful stop); a second one, while
// the graceful stop is still under way, exits at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	exited := make(chan int, 1)
	ctx, release := signalContextExit(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(code int) { exited <- code })
	defer release()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not end the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("exited with %d after the first signal, want a graceful stop", code)
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != exitSecondSignal {
			t.Fatalf("exit code %d, want %d", code, exitSecondSignal)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal was ignored")
	}
}
