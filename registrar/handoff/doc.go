// Package handoff holds the file system and socket mechanics of the
// registration handover: a registration socket bound once and passed, as a
// listening descriptor, from one registrar process to the next over a
// rendezvous socket (SCM_RIGHTS on a SOCK_SEQPACKET connection); a stable
// CSI endpoint that is a relative symbolic link swapped atomically between
// per-pod driver sockets; and the lock that orders those changes between
// processes. The decisions (when to take, swap or leave) are the
// registrar's; this package only carries them out, and never removes a file
// it cannot prove to be the caller's own.
package handoff
