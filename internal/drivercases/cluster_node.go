package drivercases

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// KubeletRoot is the kubelet's root directory on the nodes.
const KubeletRoot = csiplugin.DefaultKubeletDir

// PluginsRegistry is the directory the kubelet's plugin watcher watches.
const PluginsRegistry = KubeletRoot + "/" + csiplugin.PluginsRegistryDir

// Node does on a node what the API cannot. Node names are Kubernetes node
// names.
type Node interface {
	// RestartKubelet restarts the node's kubelet and returns once a new
	// kubelet process answers its health check.
	RestartKubelet(ctx context.Context, node string) error
	// RemoveFile removes a file on the node (not an error if it is absent).
	RemoveFile(ctx context.Context, node, path string) error
	// PluginsRegistry lists the node's plugins_registry directory.
	PluginsRegistry(ctx context.Context, node string) ([]NodeFile, error)
	// KillContainer sends SIGKILL to a container's process; id is the
	// container ID without the runtime prefix (containerd://).
	KillContainer(ctx context.Context, node, id string) error
	// KubeletLog returns the last lines of the node's kubelet log.
	KubeletLog(ctx context.Context, node string, lines int) (string, error)
	// NodeSh runs `sh -c script sh args...` on the node, seeing the node's
	// files and processes, and returns its standard output.
	NodeSh(ctx context.Context, node, script string, args ...string) (string, error)
}

// Dialer dials the unix sockets of a node: where this process can (the
// local node is this host), the cases ask the registration socket (GetInfo)
// and the driver (NodeGetInfo) what they tell the kubelet; without one they
// check what the kubelet wrote for consistency only.
type Dialer interface {
	DialNode(ctx context.Context, node, path string) (net.Conn, error)
}

// NodeFile is one entry of a directory on a node.
type NodeFile struct {
	Name   string
	Socket bool
	// File is the file's identity (device and inode, as csiplugin tells
	// sockets apart); Ctime (nanoseconds, or the best resolution the node's
	// tools give) tells a new file apart from an old one whose inode number
	// was reused.
	File  csiplugin.FileID
	Ctime string
}

// ID identifies the file across re-creations at the same path.
func (f NodeFile) ID() string { return fmt.Sprintf("%d:%d@%s", f.File.Dev, f.File.Ino, f.Ctime) }

// ListingScript lists the directory $1 on a node, one file a line, for
// ParseListing.
const ListingScript = `find "$1" -mindepth 1 -maxdepth 1 -printf '%y %D %i %C@ %f\n'`

// ParseListing parses lines of `<type> <device> <inode> <ctime> <name>` as
// written by ListingScript.
func ParseListing(out string) ([]NodeFile, error) {
	var files []NodeFile
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, " ", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("unexpected listing line %q (want: type device inode ctime name)", line)
		}
		var id csiplugin.FileID
		if _, err := fmt.Sscan(f[1], &id.Dev); err != nil {
			return nil, fmt.Errorf("listing line %q: device: %w", line, err)
		}
		if _, err := fmt.Sscan(f[2], &id.Ino); err != nil {
			return nil, fmt.Errorf("listing line %q: inode: %w", line, err)
		}
		files = append(files, NodeFile{Name: f[4], Socket: f[0] == "s", File: id, Ctime: f[3]})
	}
	return files, nil
}

func names(files []NodeFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Name)
	}
	return out
}
