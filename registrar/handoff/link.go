package handoff

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Link is the stable CSI endpoint: a relative symbolic link Dir/Name whose
// target is the base name of a driver socket in the same directory. The
// kubelet keeps the endpoint as a string and dials it afresh for every call;
// connect(2) follows the link, so swapping its target moves every later call
// to another driver without the kubelet seeing anything.
type Link struct {
	Dir, Name string
}

// Path is the link's path.
func (l Link) Path() string { return filepath.Join(l.Dir, l.Name) }

// Target returns the link's target ("" and nil when there is no link), or an
// error when something that is not a symbolic link is at the path.
func (l Link) Target() (string, error) {
	t, err := os.Readlink(l.Path())
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	}
	return "", fmt.Errorf("read the endpoint link %s: %w (remove that file: the registrar keeps a symbolic link there)", l.Path(), err)
}

// Swap points the link at target (a base name in Dir) atomically: a new link
// at a hidden temporary name is renamed over the path, so that a dial never
// finds the path missing. A file at the path that is not a symbolic link is
// not replaced.
func (l Link) Swap(target string) error {
	if filepath.Base(target) != target {
		return fmt.Errorf("endpoint link target %q: must be a name in %s, not a path", target, l.Dir)
	}
	if _, err := l.Target(); err != nil {
		return err
	}
	tmp := filepath.Join(l.Dir, "."+l.Name+"."+randomSuffix())
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create the endpoint link: %w", err)
	}
	if err := os.Rename(tmp, l.Path()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("swap the endpoint link %s to %s: %w", l.Path(), target, err)
	}
	return nil
}

// RemoveIf removes the link when it points at target, and reports whether it
// did: a link that points elsewhere belongs to the instance it points at.
func (l Link) RemoveIf(target string) (bool, error) {
	t, err := l.Target()
	if err != nil || t != target {
		return false, err
	}
	if err := os.Remove(l.Path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
