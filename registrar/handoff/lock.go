package handoff

import (
	"fmt"
	"os"
	"syscall"
)

// Lock is an exclusive advisory lock (flock(2)) on a file that every
// registrar of one driver on a node opens at the same path. It orders the
// short critical sections of the handover (take the rendezvous, swap the
// link, leave); none of them waits on another process while holding it.
type Lock struct{ path string }

// NewLock returns the lock kept in the file at path (created on first use,
// never removed: an unlinked lock file would let two processes lock two
// different inodes).
func NewLock(path string) *Lock { return &Lock{path: path} }

// Do runs f while holding the lock.
func (l *Lock) Do(f func() error) error {
	fd, err := syscall.Open(l.path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "open lock", Path: l.path, Err: err}
	}
	defer syscall.Close(fd)
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", l.path, err)
	}
	// Closing the descriptor releases the lock.
	return f()
}
