package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Kinds of Entry.
const (
	KindSocket    = "socket"
	KindDirectory = "directory"
	KindFile      = "file"    // a regular file
	KindSymlink   = "symlink" // one that does not lead to a socket or directory
	KindOther     = "other"   // a pipe, a device
)

// Entry is one file in the plugins registry.
type Entry struct {
	// Path is the host path, as the kubelet sees it.
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Target is where a symbolic link points (the kubelet follows links).
	Target string    `json:"target,omitempty"`
	Mode   string    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Age    string    `json:"age"`
	MTime  time.Time `json:"mtime"`
	// Ignored says why the kubelet's plugin watcher does not use this entry
	// (a name starting with "."), empty if it does.
	Ignored string `json:"ignored,omitempty"`
	// Plugin is what the socket answered to GetInfo; nil if it did not.
	Plugin *Plugin `json:"plugin,omitempty"`
	// GetInfo is the outcome of GetInfo: "ok", "refused (stale)",
	// "timeout (hung)", "not a registration server", or another error.
	GetInfo string `json:"getInfo,omitempty"`
	// Driver is what the CSI endpoint answered (CSI plugins only).
	Driver *Driver `json:"driver,omitempty"`
	// Instance is set for an announcement socket of csi-registrar's
	// rolling-update mode.
	Instance *Instance `json:"instance,omitempty"`

	perm fs.FileMode // permission bits (of the link's target for a link)
}

// walk lists the registry the way the kubelet's plugin watcher does at
// start: recursively, without following symbolic links to directories,
// taking a file for a socket if stat (which follows links) says so, and
// ignoring names that start with ".". Unlike the kubelet, it also lists what
// the kubelet ignores, so the operator sees it.
func (d *diagnosis) walk() {
	root := d.opts.PluginsRegistry
	localRoot := d.local(root)
	st, err := os.Stat(localRoot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.addf(SeverityError, root, "check the kubelet's --root-dir (k0s: /var/lib/k0s/kubelet, microk8s: /var/snap/microk8s/common/var/lib/kubelet) and pass --kubelet-dir; in a `kubectl debug node/...` pod pass --host-root=/host",
			"the plugins registry does not exist: no kubelet uses this directory, or the host is mounted elsewhere")
		return
	case err != nil:
		d.addf(SeverityError, root, "run doctor as root on the node", "cannot read the plugins registry: %v", err)
		return
	case !st.IsDir():
		d.addf(SeverityError, root, "point --plugins-registry at the kubelet's plugins_registry directory",
			"the plugins registry is a %s, not a directory", kindOf(st.Mode()))
		return
	}
	err = filepath.WalkDir(localRoot, func(local string, de fs.DirEntry, err error) error {
		if local == localRoot {
			return err // the root itself unreadable: stop
		}
		host := filepath.Join(root, strings.TrimPrefix(local, localRoot))
		if err != nil {
			d.addf(SeverityWarning, host, "check the file's permissions; run doctor as root",
				"cannot read this entry (the kubelet cannot either): %v", err)
			return nil
		}
		e := d.entry(host, local)
		if strings.HasPrefix(de.Name(), ".") {
			e.Ignored = "name starts with \".\": the kubelet ignores it"
		}
		d.report.Entries = append(d.report.Entries, e)
		if de.IsDir() && e.Ignored != "" {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		d.addf(SeverityError, root, "run doctor as root on the node", "cannot list the plugins registry: %v", err)
	}
	for i := range d.report.Entries {
		d.checkEntry(&d.report.Entries[i])
	}
}

// entry describes the file at local (host path host).
func (d *diagnosis) entry(host, local string) Entry {
	e := Entry{Path: host}
	lst, err := os.Lstat(local)
	if err != nil {
		e.Kind = KindOther
		return e
	}
	st := lst
	if lst.Mode().Type() == fs.ModeSymlink {
		e.Target, _ = os.Readlink(local)
		if s, err := os.Stat(local); err == nil {
			st = s
		}
	}
	e.Kind = kindOf(st.Mode())
	if lst.Mode().Type() == fs.ModeSymlink && e.Kind != KindSocket {
		e.Kind = KindSymlink // a dangling link, or one to a regular file
	}
	e.Mode = st.Mode().String()
	e.perm = st.Mode().Perm()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = sys.Uid, sys.Gid
	}
	e.MTime = st.ModTime().UTC()
	e.Age = age(time.Since(st.ModTime()))
	return e
}

func kindOf(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeSocket:
		return KindSocket
	case fs.ModeDir:
		return KindDirectory
	case 0:
		return KindFile
	case fs.ModeSymlink:
		return KindSymlink
	}
	return KindOther
}

// checkEntry adds the findings one entry has on its own: files the kubelet
// ignores, paths too long to dial, modes a kubelet may not pass.
func (d *diagnosis) checkEntry(e *Entry) {
	if e.Ignored != "" || e.Kind == KindDirectory {
		return
	}
	switch e.Kind {
	case KindSocket:
	case KindSymlink:
		d.addf(SeverityWarning, e.Path, "remove the link, or point it at the plugin's live socket",
			"a symbolic link to %q, which is not a socket: the kubelet ignores it", e.Target)
		return
	default:
		d.addf(SeverityWarning, e.Path, "move it out of plugins_registry (nothing but registration sockets belongs there)",
			"a %s, not a socket: the kubelet ignores it", e.Kind)
		return
	}
	if len(e.Path) > csiplugin.MaxSocketPathLength {
		d.addf(SeverityError, e.Path, "use a shorter driver name or kubelet --root-dir",
			"the path is %d bytes long; a unix socket address holds at most %d, so the kubelet cannot dial it",
			len(e.Path), csiplugin.MaxSocketPathLength)
	}
	if why := unreachableMode(e); why != "" {
		d.addf(SeverityWarning, e.Path, "let the plugin create its socket as root with mode 0600 or 0660 (umask 0077 as root)",
			"may be unreachable: %s", why)
	}
}

// unreachableMode says why a process running as uid 0 could be refused
// connect(2) on the socket, or "" if it could not. Connecting needs write
// permission. A kubelet running as root with CAP_DAC_OVERRIDE passes any
// mode, so nothing here blocks the usual kubelet; a kubelet as root without
// that capability (rootless Kubernetes, user namespaces, a hardened unit)
// is refused when the permission bits that apply to uid 0 (owner if the
// socket is root's, else group if gid 0, else other) lack write. SELinux
// labels are not checked (they can block even root).
func unreachableMode(e *Entry) string {
	var bit fs.FileMode
	var class string
	switch {
	case e.UID == 0:
		bit, class = 0o200, "owner"
	case e.GID == 0:
		bit, class = 0o020, "group"
	default:
		bit, class = 0o002, "other"
	}
	if e.perm&bit != 0 {
		return ""
	}
	return fmt.Sprintf("owned by %d:%d with mode %s, which gives uid 0 (as %s) no write permission: a kubelet without CAP_DAC_OVERRIDE (rootless, user namespaces) gets EACCES",
		e.UID, e.GID, e.Mode, class)
}

// age formats d as the largest whole unit: 45s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
