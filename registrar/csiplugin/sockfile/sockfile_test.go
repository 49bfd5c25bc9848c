package sockfile_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
	"github.com/fsnotify/fsnotify"
)

func TestListenCreatesModeAndRemovesOnClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x-reg.sock")
	registrartest.StaleSocket(t, path)
	s := mustListen(t, path)
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != fs.ModeSocket || st.Mode().Perm() != sockfile.Mode {
		t.Fatalf("socket = %v, %v; want a socket with mode %o", st.Mode(), err, sockfile.Mode)
	}
	// The lock file is hidden from the kubelet (a dot name) and is the only other file.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".x-reg.sock.lock x-reg.sock" {
		t.Errorf("directory holds %q, want the socket and its dot-named lock file", names)
	}
	if !s.Close() {
		t.Fatal("Close did not remove our socket")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Close left %v behind", entries)
	}
}

// Issue 13: identity is device + inode, not metadata anyone may change. A
// chmod, chown or xattr on our socket changes its ctime; it stays ours and is
// removed at Close.
func TestIdentityIgnoresMetadata(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x-reg.sock")
	s := mustListen(t, path)
	defer s.Close()
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	// trusted.* xattrs are allowed on any file type for root (user.* are not, on sockets).
	if os.Geteuid() == 0 {
		if err := unix.Lsetxattr(path, "trusted.csi-registrar-test", []byte("x"), 0); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatal(err)
		}
	}
	if !s.Owned() {
		t.Fatal("a chmod/chown/xattr made our socket foreign")
	}
	if !s.Close() {
		t.Fatal("Close left our socket behind after a chmod/chown/xattr")
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket still there: %v", err)
	}
}

func TestCloseLeavesReplacedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x-reg.sock")
	s := mustListen(t, path)
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, other, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if s.Owned() {
		t.Fatal("Owned after the path was exchanged for a regular file")
	}
	if s.Close() {
		t.Fatal("Close reported removing a file that is not ours")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
		t.Fatalf("the file exchanged in was touched: %q, %v", b, err)
	}
}

// Issue 18 item 2: the socket's mode is set before bind creates the file, so
// a symlink swapped in at the path right after bind changes nothing. A
// swapper keeps replacing the path with a symlink to a file outside the
// directory; the file's mode must never change.
func TestModeNeverFollowsSwappedSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x-reg.sock")
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the attacker: swap a symlink in at the path, then clear it
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Symlink(target, link)
			os.Rename(link, path) // replaces whatever is there, our socket included
			os.Remove(path)
		}
	}()
	const iterations = 3000
	created := 0
	for i := 0; i < iterations; i++ {
		s, err := sockfile.Listen(path)
		if err == nil {
			created++
			s.Close()
		}
		if st, err := os.Stat(target); err != nil || st.Mode().Perm() != 0o644 {
			close(stop)
			wg.Wait()
			t.Fatalf("iteration %d: the symlink's target now has mode %v (err %v), want 0644 untouched", i, st.Mode().Perm(), err)
		}
	}
	close(stop)
	wg.Wait()
	raceRan(t, created, iterations, "Listen created a socket while the path was being swapped")
}

// Issue 18 item 3: a stale socket is removed only after checking, through a
// name nobody else uses, that it is the dead socket. A swapper exchanges the
// path with a regular file (renameat2 RENAME_EXCHANGE) while Listen runs;
// the file must never be deleted.
func TestStaleRemovalNeverDeletesExchangedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x-reg.sock")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	vf, err := os.Open(victim)
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	deleted := func() bool {
		var st unix.Stat_t
		return unix.Fstat(int(vf.Fd()), &st) != nil || st.Nlink == 0
	}

	swap := make(chan bool) // true: swap until told false
	done := make(chan struct{})
	go func() {
		defer close(done)
		running := false
		for {
			if !running {
				v, ok := <-swap
				if !ok {
					return
				}
				running = v
				continue
			}
			select {
			case v, ok := <-swap:
				if !ok {
					return
				}
				running = v
				if !v {
					swap <- false // acknowledge: no exchange runs from now on
				}
			default:
				unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, victim, unix.RENAME_EXCHANGE)
			}
		}
	}()
	defer func() { close(swap); <-done }()

	// At least iterations rounds, and more (up to 20 times as many) until
	// one round took the stale socket over: on a loaded machine the swapper
	// can win every round of the first few hundred.
	const iterations = 400
	removed := 0
	for i := 0; i < iterations || removed == 0 && i < 20*iterations; i++ {
		// The victim back at its name, a stale socket at the path.
		if st, err := os.Lstat(victim); err != nil || st.Mode().Type() != 0 {
			unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, victim, unix.RENAME_EXCHANGE)
		}
		os.Remove(path)
		registrartest.StaleSocket(t, path)

		swap <- true
		s, err := sockfile.Listen(path)
		swap <- false
		<-swap

		if deleted() {
			t.Fatalf("iteration %d: the file exchanged in at the path was deleted (Listen: %v)", i, err)
		}
		if err == nil {
			removed++
			s.Close() // no swapper now: removes our socket if it is at the path
		}
		// Tidy for the next round: our socket may have been exchanged to the victim's name.
		for _, p := range []string{path, victim} {
			if st, err := os.Lstat(p); err == nil && st.Mode().Type() == fs.ModeSocket {
				os.Remove(p)
			}
		}
		if _, err := os.Lstat(victim); err != nil {
			if err := os.Rename(path, victim); err != nil {
				t.Fatalf("iteration %d: cannot put the victim back: %v", i, err)
			}
		}
	}
	raceRan(t, removed, iterations, "Listen took over the stale socket while the path was being exchanged")
}

func TestListenErrorKinds(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "dir"), 0o755)
	os.Symlink(file, filepath.Join(dir, "link"))
	held, err := sockfile.Listen(filepath.Join(dir, "held.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	type tc struct {
		path string
		kind sockfile.Kind
		fix  string
	}
	cases := []tc{
		{live, sockfile.KindInUse, "second copy"},
		{filepath.Join(dir, "held.sock"), sockfile.KindInUse, "second copy"},
		{file, sockfile.KindNotSocket, "remove or move it"},
		{filepath.Join(dir, "dir"), sockfile.KindNotSocket, "remove or move it"},
		{filepath.Join(dir, "link"), sockfile.KindNotSocket, "remove or move it"},
		{filepath.Join(dir, "missing", "x.sock"), sockfile.KindMissingDirectory, "mount the directory"},
		{filepath.Join(file, "x.sock"), sockfile.KindMissingDirectory, "mount the directory"},
	}
	if os.Geteuid() == 0 {
		// Root ignores mode bits: a read-only mount is what refuses it.
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o755)
		if err := unix.Mount("tmpfs", ro, "tmpfs", unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("mount a read-only tmpfs: %v", err)
		}
		defer unix.Unmount(ro, unix.MNT_DETACH)
		cases = append(cases, tc{filepath.Join(ro, "x.sock"), sockfile.KindPermission, "without readOnly"})
	} else {
		t.Log("not root: the permission case is not run")
	}
	for _, c := range cases {
		s, err := sockfile.Listen(c.path)
		if err == nil {
			s.Close()
			t.Errorf("Listen(%s) succeeded, want %s", c.path, c.kind)
			continue
		}
		var le *sockfile.ListenError
		if !errors.As(err, &le) || le.Kind != c.kind {
			t.Errorf("Listen(%s) = %v, want kind %s", c.path, err, c.kind)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.path) || !strings.Contains(msg, c.fix) {
			t.Errorf("Listen(%s) error %q does not name the path and the fix (%q)", c.path, msg, c.fix)
		}
	}
	if st, err := os.Lstat(file); err != nil || st.Mode().Type() != 0 {
		t.Errorf("the regular file was touched: %v", err)
	}
	if c, err := net.Dial("unix", live); err != nil {
		t.Errorf("the live socket no longer answers: %v", err)
	} else {
		c.Close()
	}
}

// TestCloseIsRemoveOfTheName: the kubelet's plugin watcher acts only on
// fsnotify Create and Remove, so Close must unlink the socket's name (a
// Remove), never rename it aside (a Rename, which the kubelet ignores).
func TestCloseIsRemoveOfTheName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.csi.example.com-reg.sock")
	s := mustListen(t, path)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	if !s.Close() {
		t.Fatal("Close did not remove its own socket")
	}
	for {
		select {
		case ev := <-w.Events:
			if ev.Name != path {
				continue // the lock file
			}
			if ev.Has(fsnotify.Rename) || !ev.Has(fsnotify.Remove) {
				t.Fatalf("Close was seen as %v of %s, want a Remove", ev.Op, ev.Name)
			}
			return
		case err := <-w.Errors:
			t.Fatal(err)
		case <-time.After(10 * time.Second): // hang guard
			t.Fatal("no event for the socket's name after Close")
		}
	}
}

// A listener woken by the Remove of the path meets the lock of the owner
// that unlinked its socket and has not released the lock yet (Close
// unlinks, then unlocks): Listen waits for the release instead of calling
// the path in use. With a file at the path, the lock stands for it: no wait.
func TestListenAwaitsTheReleaseAfterTheUnlink(t *testing.T) {
	platformtest.SkipUnderEmulation(t, "the release 20 ms after Listen began must come within the lock's 100 ms wait on the real clock; an emulated goroutine on a loaded machine ran later (seen on s390x)")
	path := filepath.Join(t.TempDir(), "d-reg.sock")
	old := mustListen(t, path)
	sockfile.UnlinkOnly(old)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(20 * time.Millisecond)
		old.Close()
	}()
	s, err := sockfile.Listen(path)
	<-released
	if err != nil {
		t.Fatalf("Listen while the previous owner released its lock after the unlink: %v", err)
	}
	defer s.Close()

	var le *sockfile.ListenError
	if _, err := sockfile.Listen(path); !errors.As(err, &le) || le.Kind != sockfile.KindInUse {
		t.Fatalf("a second Listen at a served path: %v, want KindInUse", err)
	}
}

// mustListen is sockfile.Listen(path), failing the test on an error.
func mustListen(t *testing.T, path string) *sockfile.Socket {
	t.Helper()
	s, err := sockfile.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raceRan ends a race test of rounds rounds in which n rounds did what the
// race is about: it fails the test if none did (the race never ran), and
// logs how many did.
func raceRan(t *testing.T, n, rounds int, what string) {
	t.Helper()
	if n == 0 {
		t.Fatalf("%s in none of %d rounds: the race was never run", what, rounds)
	}
	t.Logf("%s in %d of %d rounds", what, n, rounds)
}
