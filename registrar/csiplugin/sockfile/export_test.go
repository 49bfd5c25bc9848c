package sockfile

import "golang.org/x/sys/unix"

// Abandon simulates the process dying while it owns s: the listener and the
// lock are released, the socket file and the lock file stay behind.
func Abandon(s *Socket) {
	s.listener.Close()
	for _, fd := range []*int{&s.lockfd, &s.pinfd, &s.dirfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}
