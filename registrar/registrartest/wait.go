package registrartest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// WaitPath waits until path exists (Lstat): a registration socket, as the
// kubelet's plugin watcher sees it appear, on its directory's events
// (WaitDir). The directory must exist. A socket's file appears at bind(2),
// before it listens: a dial right after WaitPath may be refused. To know
// that a registrar serves, wait for its log line "registration socket
// created" (Buffer.Wait).
func WaitPath(ctx context.Context, path string) error {
	err := WaitDir(ctx, filepath.Dir(path), func() bool {
		_, err := os.Lstat(path)
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("%s did not appear: %w", path, err)
	}
	return nil
}

// WaitDir waits until cond holds, looking again at each event in dir (a
// file created, removed, renamed or written there). The watch is set before
// the first look, so a change between the two is not missed. dir must
// exist.
func WaitDir(ctx context.Context, dir string, cond func() bool) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return err
	}
	for !cond() {
		select {
		case <-w.Events: // any change in the directory: look again
		case err := <-w.Errors:
			return fmt.Errorf("watching %s: %w", dir, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Buffer is an io.Writer that is safe for concurrent use and whose readers
// can wait for what is written: a registrar's or a driver's log, a
// process's output. The zero value
// is ready to use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed at the next write
}

// wake returns the channel the next write closes. b.mu is held.
func (b *Buffer) wake() chan struct{} {
	if b.written == nil {
		b.written = make(chan struct{})
	}
	return b.written
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return n, err
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Wait waits until cond holds for everything written so far, checking it
// after each write, and returns that text.
func (b *Buffer) Wait(ctx context.Context, cond func(string) bool) (string, error) {
	for {
		b.mu.Lock()
		s, next := b.buf.String(), b.wake()
		b.mu.Unlock()
		if cond(s) {
			return s, nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}
