package registrartest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

func TestWaitPath(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	done := make(chan error, 1)
	go func() { done <- registrartest.WaitPath(context.Background(), p) }()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// There already: at once. Never there: ctx's error.
	if err := registrartest.WaitPath(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := registrartest.WaitPath(ctx, filepath.Join(dir, "never")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Path of a file never made = %v, want the deadline", err)
	}
}

func TestWaitDir(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	sized := func() bool { st, err := os.Stat(p); return err == nil && st.Size() > 0 }
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- registrartest.WaitDir(context.Background(), dir, sized) }()
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := registrartest.WaitDir(ctx, dir, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitDir for what never holds = %v, want the deadline", err)
	}
}

func TestBuffer(t *testing.T) {
	var b registrartest.Buffer
	go func() {
		for i := range 3 {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}()
	s, err := b.Wait(context.Background(), func(s string) bool { return strings.Contains(s, "line 2") })
	if err != nil || !strings.HasPrefix(s, "line 0\nline 1\nline 2") {
		t.Fatalf("Wait = %q, %v", s, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.Wait(ctx, func(s string) bool { return strings.Contains(s, "never") }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait for what is never written = %v, want the deadline", err)
	}
}
