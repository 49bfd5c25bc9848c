// Package testwait lets tests wait for events instead of polling: a process
// ending (a pidfd). (A file appearing and output being written:
// registrar/registrartest's WaitPath and Buffer, which the driver guide's
// copied tests can import too.) Until, a condition checked again on a timer
// with a deadline, is for what has no event to wait on; its callers say why.
package testwait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Exit waits until the process pid has ended (it may be a zombie that its
// parent has not reaped yet): its pidfd becomes readable then. A pid that
// does not exist has ended.
func Exit(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	} else if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	for {
		// poll in slices, so that ctx is seen; the wake-up is the event.
		timeout := 100
		if d, ok := ctx.Deadline(); ok {
			timeout = max(0, min(timeout, int(time.Until(d).Milliseconds())))
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll pidfd %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("process %d still runs: %w", pid, ctx.Err())
		}
	}
}

// Until checks cond every interval until it holds or ctx ends. Only for
// conditions that nothing signals (an HTTP endpoint's answer changing, a
// socket starting to accept): where an event exists, wait on it instead.
func Until(ctx context.Context, interval time.Duration, cond func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
