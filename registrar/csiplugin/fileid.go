package csiplugin

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// FileID tells one file from another at the same path: device and inode
// numbers. A socket re-created at a path (a driver or registrar restart) has
// another FileID; metadata anyone may change (mode, owner, xattrs) is not
// part of it.
type FileID struct{ Dev, Ino uint64 }

// FileIDOf returns the FileID of the file at path, following symbolic links.
func FileIDOf(path string) (FileID, error) {
	st, err := os.Stat(path)
	if err != nil {
		return FileID{}, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, errors.New("no device and inode numbers")
	}
	return FileID{Dev: uint64(sys.Dev), Ino: sys.Ino}, nil
}

// FileIDOfStat returns the FileID an fstat-family call reported.
func FileIDOfStat(st *unix.Stat_t) FileID { return FileID{Dev: uint64(st.Dev), Ino: st.Ino} }
