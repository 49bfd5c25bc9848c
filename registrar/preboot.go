package registrar

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// A node's reboot leaves the mode's last announcement sockets on disk, dead.
// The kubelet, which walks plugins_registry when it starts, adds each to its
// desired state and dials it; a socket removed through a hidden name (the
// plugin watcher ignores renames) would stay there, redialed every ~2 min
// until the kubelet restarts. But no kubelet running now can hold such a
// socket in its actual state: the plugin manager adds a socket to its
// actual state only after that socket answered GetInfo
// (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go,
// GenerateRegisterPluginFunc: GetInfo, ValidatePlugin, then AddPlugin), and
// a socket made before the boot has had no listener since; and it calls
// DeRegisterPlugin only for sockets in its actual state
// (reconciler/reconciler.go, reconcile). So an unlink by name only takes
// the path out of the desired state: the driver stays registered.

// readBootTime returns when the node booted: btime in /proc/stat (whole
// seconds, the kernel's real-time clock minus the time since boot).
func readBootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("/proc/stat: btime %q: %w", strings.TrimSpace(v), err)
			}
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat has no btime line")
}

// madeBeforeBoot reports whether path is a socket last modified (mtime)
// before boot. The ctime would be no stronger: both come from the same
// clock, which is what a step after the boot misleads; a restore of the
// directory's files keeps the mtime.
func madeBeforeBoot(path string, boot time.Time) bool {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return false
	}
	return time.Unix(st.Mtim.Unix()).Before(boot)
}

// refused reports whether connecting to the socket at path is refused:
// nobody listens on it.
func refused(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// removePreBoot unlinks, by name, every announcement socket of the driver
// (any instance's) that was made before the node booted and that nobody
// serves. Both conditions are checked: a clock stepped forward after the
// boot (a node without a real-time clock) could make a socket made since
// the boot look older than the boot, and such a socket, if dead, may be in
// the kubelet's actual state; a live one never goes.
func (l *loop) removePreBoot() {
	boot, err := l.r.bootTime()
	if err != nil {
		l.log.Warn("cannot read when the node booted; dead sockets are removed through hidden names only", "err", err)
		return
	}
	l.removeDeadByName(func(path string) bool { return madeBeforeBoot(path, boot) },
		"removed by name a dead socket made before the node booted: no kubelet running now registered it",
		"bootTime", boot.UTC().Format(time.RFC3339))
}

// removeDeadByName unlinks by name, under its lock file, every announcement
// socket of the driver other than our current one that pick selects and
// that refuses connections. The names are published first (Removed), so
// that the instances, this one included, take those Removes for what they
// are: nothing for the kubelet.
func (l *loop) removeDeadByName(pick func(path string) bool, msg string, evidence ...any) {
	entries, err := os.ReadDir(l.roll.dir)
	if err != nil {
		return
	}
	var dead []string
	for _, e := range entries {
		if _, _, ok := csiplugin.ParseRollingUpdateSocketName(l.driver.name, e.Name()); !ok || e.Type() != fs.ModeSocket {
			continue
		}
		path := filepath.Join(l.roll.dir, e.Name())
		if path != l.sock.path && pick(path) && refused(path) {
			dead = append(dead, e.Name())
		}
	}
	if len(dead) == 0 {
		return
	}
	l.roll.self.update(func(st *InstanceState) { st.Removed = dead })
	var removed []string
	for _, name := range dead {
		if ok, _ := sockfile.RemoveDeadByName(filepath.Join(l.roll.dir, name)); ok {
			removed = append(removed, name)
			l.log.Info(msg, append([]any{"removed", name}, evidence...)...)
		}
	}
	// Only what went: a socket found live under its lock (one being
	// created) must count again when it is unlinked by name later.
	l.roll.self.update(func(st *InstanceState) { st.Removed = removed })
}

// removeDeadAfterKubeletRestart: the kubelet registered our confirmed
// announcement again, which it does only when its actual state lost it: it
// restarted. The restarted kubelet added to its actual state only sockets
// that answered its GetInfo; a socket that is dead now was dead when it
// walked the directory (unless it died in the moments since, after the new
// kubelet registered it: the residual window, docs/design.md), so it is in
// the kubelet's desired state only, redialed until it restarts again. Each
// is unlinked by name, under its lock file: the Remove takes it out of the
// desired state and unregisters nothing.
func (l *loop) removeDeadAfterKubeletRestart() {
	l.removeDeadByName(func(string) bool { return true },
		"removed by name a dead socket the restarted kubelet could not register: it stays in no kubelet state")
}
