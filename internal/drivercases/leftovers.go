package drivercases

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Leftover is a volume of the driver on a node whose pod is gone: the
// kubelet's volume directory of it, mounted or not. The kubelet removes
// both once NodeUnpublishVolume succeeded; a leftover is what a driver that
// could not unpublish (or was uninstalled first) left behind.
type Leftover struct {
	Node   string
	Case   string // the case after which it was found
	PodUID string
	// Dir is the kubelet's directory of the volume:
	// <kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<volume>.
	Dir          string
	Mounted      bool   // Dir/mount is a mount point on the node
	VolumeHandle string // the driver's volume ID (vol_data.json)
}

// Cleanup returns the commands that remove it, to run as root on the node:
// the unmount (if mounted), then the directory without -r (a mount still
// there makes rmdir fail rather than delete the volume's data). The
// kubelet removes the emptied pod directory itself.
func (l Leftover) Cleanup() []string {
	var c []string
	if l.Mounted {
		c = append(c, "umount "+ShellQuote(l.Dir+"/mount"))
	}
	c = append(c, "rmdir "+ShellQuote(l.Dir+"/mount")+" 2>/dev/null; rm -f "+ShellQuote(l.Dir+"/vol_data.json")+" && rmdir "+ShellQuote(l.Dir))
	return c
}

func (l Leftover) String() string {
	m := "not mounted"
	if l.Mounted {
		m = "mounted"
	}
	return fmt.Sprintf("node %s: %s (%s; volume %s of pod %s, which is gone; found after %s)", l.Node, l.Dir, m, orDash(l.VolumeHandle), l.PodUID, l.Case)
}

// leftoverScript prints, for each CSI volume directory of driver $1 under
// the kubelet root $2, "<pod uid> <dir> <mounted 0|1> <volume handle>",
// tab-separated: the directories whose vol_data.json names the driver;
// mounted from the host's mount table (pid 1's).
const leftoverScript = `drv=$1; root=$2
for f in "$root"/pods/*/volumes/kubernetes.io~csi/*/vol_data.json; do
  [ -e "$f" ] || continue
  grep -q "\"driverName\":\"$drv\"" "$f" || continue
  d=${f%/vol_data.json}
  u=${d#"$root"/pods/}; u=${u%%/*}
  m=0; grep -q " $d/mount " /proc/1/mountinfo && m=1
  h=$(sed -n 's/.*"volumeHandle":"\([^"]*\)".*/\1/p' "$f")
  printf '%s\t%s\t%s\t%s\n' "$u" "$d" "$m" "$h"
done
true`

// parseLeftovers reads leftoverScript's output on node, keeping the
// volumes whose pod UID is not in live.
func parseLeftovers(node, out string, live map[string]bool) []Leftover {
	var l []Leftover
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || live[f[0]] {
			continue
		}
		l = append(l, Leftover{Node: node, PodUID: f[0], Dir: f[1], Mounted: f[2] == "1", VolumeHandle: f[3]})
	}
	return l
}

// leftoverGrace is how long a volume of a deleted pod may take to be torn
// down before it counts as left (the kubelet's reconciler acts within a
// second or two once the pod is gone).
const leftoverGrace = 30 * time.Second

// findLeftovers lists the driver's volumes on nodes whose pod is gone,
// giving a teardown in progress leftoverGrace (the ones in known, already
// reported, and those of the pods in waited, whose teardown a case waited
// for already, are not waited for). Verify's own errors are retried within
// that bound, then returned (VerifyError).
func (s *suite) findLeftovers(ctx context.Context, nodes []string, known map[string]bool, waited map[string]bool) ([]Leftover, error) {
	var left []Leftover
	var own error
	complete := false
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, leftoverGrace, true, func(ctx context.Context) (bool, error) {
		pods, err := s.cl.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			own = &VerifyError{Err: fmt.Errorf("list every pod (to tell a volume of a live pod): %w", err)}
			return false, nil
		}
		live := map[string]bool{}
		for _, p := range pods.Items {
			live[string(p.UID)] = true
		}
		var round []Leftover
		for _, n := range nodes {
			out, err := s.cl.Node.NodeSh(ctx, n, leftoverScript, s.d.name, KubeletRoot)
			if err != nil {
				own = &VerifyError{Err: fmt.Errorf("list the driver's volume directories on %s: %w", n, err)}
				return false, nil
			}
			round = append(round, parseLeftovers(n, out, live)...)
		}
		left, complete, own = round, true, nil
		for _, l := range left {
			if !known[l.Dir] && !waited[l.PodUID] {
				return false, nil
			}
		}
		return true, nil
	})
	if !complete {
		if own == nil {
			own = &VerifyError{Err: err}
		}
		return nil, own
	}
	sort.Slice(left, func(i, j int) bool { return left[i].Dir < left[j].Dir })
	return left, nil
}

// LeftText is the summary's "left on the node" section: each leftover with
// the commands that remove it ("" when nothing is left).
func LeftText(runs []Result) string {
	var b strings.Builder
	for _, r := range runs {
		for _, l := range r.Left {
			if b.Len() == 0 {
				b.WriteString("==== left on the node (the driver's volumes whose pods are gone; the kubelet keeps retrying NodeUnpublishVolume while the driver runs). Remove them as root on the node:\n")
			}
			fmt.Fprintf(&b, "- %s: %s\n", r.Driver, l)
			for _, c := range l.Cleanup() {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
	}
	if b.Len() > 0 {
		b.WriteString("    (and the driver's own state of those volume IDs, if it keeps any)\n")
	}
	return b.String()
}
