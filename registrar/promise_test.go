package registrar_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// fileState is what the promise test compares of a file: its inode, its
// type and what it holds (a regular file's bytes, a link's target).
type fileState struct {
	ino     uint64
	mode    os.FileMode
	content []byte
}

func stateOf(t *testing.T, path string) (fileState, bool) {
	t.Helper()
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return fileState{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	s := fileState{ino: fi.Sys().(*syscall.Stat_t).Ino, mode: fi.Mode().Type()}
	switch {
	case fi.Mode().IsRegular():
		s.content, _ = os.ReadFile(path)
	case fi.Mode()&os.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		s.content = []byte(target)
	}
	return s, true
}

// plantForeign puts, in the two directories the registrar writes, files it
// did not create: live and dead sockets of other programs (another
// driver's registration socket, a driver's csi.sock, a socket nobody serves
// any more), a regular file, a hidden file and a symbolic link. It returns
// their paths.
func plantForeign(t *testing.T, n handoverNode) []string {
	t.Helper()
	var paths []string
	socket := func(path string, live bool) {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		if live {
			t.Cleanup(func() { l.Close() })
		} else {
			l.Close()
		}
		paths = append(paths, path)
	}
	file := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	socket(filepath.Join(n.regDir, "other.csi.example.com-reg.sock"), true)
	socket(filepath.Join(n.regDir, "gone.csi.example.com-reg.sock"), false)
	file(filepath.Join(n.regDir, "notes"), "an operator's file\n")
	socket(filepath.Join(n.csiDir, "csi.sock"), true)
	socket(filepath.Join(n.csiDir, "old.sock"), false)
	file(filepath.Join(n.csiDir, ".hidden"), "x")
	link := filepath.Join(n.csiDir, "driver.sock")
	if err := os.Symlink("csi.sock", link); err != nil {
		t.Fatal(err)
	}
	return append(paths, link)
}

// TestHandoverTouchesOnlyItsOwnFiles: the promise (docs/design.md, "What the
// registrar may replace or remove") through a node plugin's life with the
// handover: installed, rolled out, the rollout undone midway, rolled out
// again, uninstalled. Every file it did not create in the registration and
// driver socket directories is the same file with the same content at the
// end, and of what it created only the lock file is left (it stays, empty,
// so that no two instances ever lock two different files).
func TestHandoverTouchesOnlyItsOwnFiles(t *testing.T) {
	n := newHandoverNode(t)
	foreign := plantForeign(t, n)
	before := map[string]fileState{}
	for _, p := range foreign {
		before[p], _ = stateOf(t, p)
	}

	a := startPod(t, n, "a")
	handoverKubeletRegisters(t, n, a)
	b := startPod(t, n, "b") // a rollout
	wantRegistered(t, b)
	wantLink(t, n, b)
	b.reg.stop(t) // undone midway: the new pod goes, the old one stays
	wantLink(t, n, a)
	wantNewestAgain(t, a)
	c := startPod(t, n, "c") // rolled out again
	wantRegistered(t, c)
	wantLink(t, n, c)
	a.reg.stop(t)
	c.reg.cancel() // uninstalled
	c.reg.stop(t)
	for _, p := range []*pod{a, b, c} {
		p.driver.stop(t)
	}

	for _, p := range foreign {
		after, ok := stateOf(t, p)
		switch {
		case !ok:
			t.Errorf("%s was removed: the registrar did not create it", p)
		case after.ino != before[p].ino || after.mode != before[p].mode:
			t.Errorf("%s was replaced: the registrar did not create it", p)
		case !bytes.Equal(after.content, before[p].content):
			t.Errorf("%s changed: %q, was %q", p, after.content, before[p].content)
		}
	}
	allowed := []string{".csi-registrar-handover.lock"}
	for _, dir := range []string{n.regDir, n.csiDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if slices.Contains(foreign, p) || slices.Contains(allowed, e.Name()) {
				continue
			}
			t.Errorf("%s left after the uninstall: created by the registrar or its drivers, and not removed", p)
		}
	}
}
