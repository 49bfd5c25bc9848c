// Package sockowner finds the container whose process listens on a unix
// socket on a node: the e2e driver suite's way to learn which container of a
// node plugin pod is the CSI driver from what runs, not from the manifests.
//
// The search runs on the node as one shell script (Script), the same on the
// local node and inside a kind node: the socket file's device and inode; the
// socket fds of every process (/proc/<pid>/fd); the listening unix sockets of
// each process's network namespace with a path (/proc/<pid>/net/unix); the
// one whose path, seen through /proc/<pid>/root, is that file; the owner's
// container ID from its cgroup. Parse reads the script's output and Container
// maps it to a container of the pod.
package sockowner

import (
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Script is the search, for `sh -c Script sh <path>`.
//
//go:embed find.sh
var Script string

// Owner is a process that listens on the socket.
type Owner struct {
	PID         int
	ContainerID string // from its cgroup; empty when the cgroup names none
	Comm        string
}

// Finding is what the script saw on the node for one path.
type Finding struct {
	Node, Path string
	Missing    bool   // no file at Path
	NotSocket  bool   // a file that is not a socket
	ID         string // dev:inode of the socket file
	// Procs is how many processes had a socket fd, Sockets how many
	// listening unix sockets with a path those processes' namespaces held.
	Procs, Sockets int
	Owners         []Owner
}

// Parse reads the output of Script run on node for path.
func Parse(node, path, out string) (Finding, error) {
	f := Finding{Node: node, Path: path}
	scanned := false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		w := strings.Fields(line)
		if len(w) == 0 {
			continue
		}
		switch {
		case w[0] == "nofile":
			f.Missing = true
			return f, nil
		case w[0] == "notsocket":
			f.NotSocket = true
			return f, nil
		case w[0] == "target" && len(w) == 2:
			f.ID = w[1]
		case w[0] == "scanned" && len(w) == 3:
			var err1, err2 error
			f.Procs, err1 = strconv.Atoi(w[1])
			f.Sockets, err2 = strconv.Atoi(w[2])
			if err1 != nil || err2 != nil {
				return f, fmt.Errorf("socket owner search on %s: bad line %q", node, line)
			}
			scanned = true
		case w[0] == "owner" && len(w) >= 3:
			pid, err := strconv.Atoi(w[1])
			if err != nil {
				return f, fmt.Errorf("socket owner search on %s: bad line %q", node, line)
			}
			o := Owner{PID: pid, Comm: strings.Join(w[3:], " ")}
			if w[2] != "-" {
				o.ContainerID = w[2]
			}
			f.Owners = append(f.Owners, o)
		default:
			return f, fmt.Errorf("socket owner search on %s: unexpected line %q", node, line)
		}
	}
	if !scanned {
		return f, fmt.Errorf("socket owner search on %s for %s ended early: %q", node, path, out)
	}
	return f, nil
}

// tried says what the search did, for an error.
func (f Finding) tried() string {
	return fmt.Sprintf("tried: the socket file %s on node %s (identity %s); the socket fds of the node's processes (/proc/<pid>/fd: %d processes) and the listening unix sockets with a path in their network namespaces (/proc/<pid>/net/unix: %d), each path resolved through /proc/<pid>/root and compared by device and inode; the owner's container ID from /proc/<pid>/cgroup",
		f.Path, f.Node, f.ID, f.Procs, f.Sockets)
}

// Container returns the name of the container of the pod (containers: the
// pod's container IDs, without the runtime prefix, by container name) whose
// process listens on the socket, or an error that names what was tried.
func (f Finding) Container(pod string, containers map[string]string) (string, error) {
	switch {
	case f.Missing:
		return "", fmt.Errorf("cannot find the driver container of pod %s: no file at %s on node %s (the registrar's --kubelet-registration-path; tried: a stat of that path on the node)", pod, f.Path, f.Node)
	case f.NotSocket:
		return "", fmt.Errorf("cannot find the driver container of pod %s: %s on node %s is not a socket (tried: a stat of that path on the node)", pod, f.Path, f.Node)
	case len(f.Owners) == 0:
		return "", fmt.Errorf("cannot find the driver container of pod %s: no process on node %s listens on %s (a socket file nobody serves); %s", pod, f.Node, f.Path, f.tried())
	}
	byID := map[string]string{}
	var ids []string
	for name, id := range containers {
		byID[id] = name
		ids = append(ids, name+"="+ShortID(id))
	}
	sort.Strings(ids)
	found := map[string]bool{}
	var owners []string
	for _, o := range f.Owners {
		owners = append(owners, fmt.Sprintf("pid %d (%s) in container %s", o.PID, o.Comm, orNone(ShortID(o.ContainerID))))
		if name, ok := byID[o.ContainerID]; ok {
			found[name] = true
		}
	}
	switch len(found) {
	case 1:
		for name := range found {
			return name, nil
		}
	case 0:
		return "", fmt.Errorf("cannot find the driver container of pod %s: %s listen on %s on node %s, in no container of the pod (%s); %s",
			pod, strings.Join(owners, ", "), f.Path, f.Node, strings.Join(ids, ", "), f.tried())
	}
	var names []string
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	return "", fmt.Errorf("cannot find the driver container of pod %s: processes of %d of its containers (%s) listen on %s on node %s: %s", pod, len(names), strings.Join(names, ", "), f.Path, f.Node, strings.Join(owners, ", "))
}

// ShortID is a container ID as the errors print it: its first 13 characters.
func ShortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
