package drivercases

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/report"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

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
func parseLeftovers(node, out string, live map[string]bool) []report.Leftover {
	var l []report.Leftover
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || live[f[0]] {
			continue
		}
		l = append(l, report.Leftover{Node: node, PodUID: f[0], Dir: f[1], Mounted: f[2] == "1", VolumeHandle: f[3]})
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
func (s *suite) findLeftovers(ctx context.Context, nodes []string, known map[string]bool, waited map[string]bool) ([]report.Leftover, error) {
	var left []report.Leftover
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
		var round []report.Leftover
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
