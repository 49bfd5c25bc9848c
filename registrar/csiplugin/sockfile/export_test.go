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

// UnlinkOnly does the first half of Close: the listener closed and the
// socket file unlinked, the lock still held; Close does the rest.
func UnlinkOnly(s *Socket) {
	s.listener.Close()
	unix.Unlinkat(s.dirfd, s.name, 0)
}
