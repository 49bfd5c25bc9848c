package drivercases

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// R2's reverse direction: a volume the new instance published is
// unpublished through the old one. The kubelet does it when its endpoint
// returns to the old instance (a rollout undone while both run, the new pod
// deleted or failing), which verify cannot bring about on purpose; so,
// while both instances run (the new pod's registrar held), verify calls
// the two sockets itself, as the kubelet calls them for a CSI inline
// volume: NodePublishVolume on the new instance, NodeUnpublishVolume on the
// old one, at a target under the kubelet's pods directory (a pod UID of
// verify's own, which no pod has). The volume is torn down through the new
// instance afterwards, whatever the old one did.

// reverseResult is what the reverse direction found: a finding of the
// driver's, or why it was not tried.
type reverseResult struct {
	finding string // the driver's failure ("" when none)
	why     string // why not tried ("" when tried)
}

// markMountedScript prints "mounted" when $1 is a mount point on the host.
const markMountedScript = `grep -q " $1 " /proc/1/mountinfo && echo mounted; true`

// reverseCleanupScript unmounts $1 if it is still mounted, then removes the
// target and its parents up to the pod directory $2 (rmdir only).
const reverseCleanupScript = `t=$1; top=$2
if grep -q " $t " /proc/1/mountinfo; then umount "$t" || umount -l "$t"; fi
d=$t
while [ -n "$d" ] && [ "$d" != "$(dirname "$top")" ]; do rmdir "$d" 2>/dev/null || true; d=$(dirname "$d"); done
true`

// reverseDirection publishes a volume through the new instance (socket
// newSock) and unpublishes it through the old one (oldSock), both on node.
func (s *suite) reverseDirection(ctx context.Context, node, oldSock, newSock string) reverseResult {
	if s.cl.Dialer == nil {
		return reverseResult{why: "verify cannot dial the node's sockets here (verify --local-node-sockets on the node itself)"}
	}
	cd, err := s.cl.Client.StorageV1().CSIDrivers().Get(ctx, s.d.name, metav1.GetOptions{})
	if err != nil {
		return reverseResult{why: fmt.Sprintf("the CSIDriver %s: %v", s.d.name, err)}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	uid := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	podDir := KubeletRoot + "/pods/" + uid
	target := podDir + "/volumes/kubernetes.io~csi/reverse/mount"
	volID := "csi-verify-reverse-" + h
	if _, err := s.cl.Node.NodeSh(ctx, node, `mkdir -p "$1"`, path.Dir(target)); err != nil {
		return reverseResult{why: fmt.Sprintf("verify could not make the target's parent directory on %s: %v", node, err)}
	}
	vctx := map[string]string{}
	if cd.Spec.PodInfoOnMount != nil && *cd.Spec.PodInfoOnMount {
		// What the kubelet adds for an inline volume of such a driver.
		vctx = map[string]string{
			"csi.storage.k8s.io/pod.name":            "csi-registrar-verify-reverse",
			"csi.storage.k8s.io/pod.namespace":       s.cl.Namespace,
			"csi.storage.k8s.io/pod.uid":             uid,
			"csi.storage.k8s.io/serviceAccount.name": "default",
			"csi.storage.k8s.io/ephemeral":           "true",
		}
	}
	call := func(sock string, f func(csi.NodeClient, context.Context) error) error {
		conn, err := nodeConn(s.cl.Dialer, node, sock)
		if err != nil {
			return &VerifyError{Err: err}
		}
		defer conn.Close()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return f(csi.NewNodeClient(conn), cctx)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = call(newSock, func(c csi.NodeClient, ctx context.Context) error {
			_, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volID, TargetPath: target})
			return err
		})
		_, _ = s.cl.Node.NodeSh(cctx, node, reverseCleanupScript, target, podDir)
	}()
	err = call(newSock, func(c csi.NodeClient, ctx context.Context) error {
		_, err := c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: volID, TargetPath: target, VolumeContext: vctx,
			VolumeCapability: &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			},
		})
		return err
	})
	if err != nil {
		return reverseResult{why: fmt.Sprintf("NodePublishVolume of an inline volume without attributes, called by verify on the new instance's socket %s, failed: %v", newSock, err)}
	}
	err = call(oldSock, func(c csi.NodeClient, ctx context.Context) error {
		_, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volID, TargetPath: target})
		return err
	})
	if VerifysOwn(err) {
		return reverseResult{why: fmt.Sprintf("verify could not call the old instance's socket %s: %v", oldSock, err)}
	}
	if status.Code(err) == codes.Unavailable {
		return reverseResult{why: fmt.Sprintf("the old instance's socket %s does not answer (R3 and R4 judge that): %v", oldSock, err)}
	}
	out, merr := s.cl.Node.NodeSh(ctx, node, markMountedScript, target)
	switch {
	case err != nil:
		st := status.Convert(err)
		return reverseResult{finding: fmt.Sprintf("NodeUnpublishVolume on the old instance returned %s for a volume the new instance published while both ran (%s: %s; verify's own calls on the two sockets, as the kubelet calls the old instance again when its endpoint returns to it: a rollout undone, the new pod deleted): the old instance does not see what the new one wrote to the node since it started", st.Code(), st.Code(), st.Message())}
	case merr != nil:
		return reverseResult{why: fmt.Sprintf("whether %s is still mounted on %s: %v", target, node, merr)}
	case out != "":
		return reverseResult{finding: fmt.Sprintf("NodeUnpublishVolume on the old instance succeeded for a volume the new instance published while both ran, yet left %s mounted (verify's own calls on the two sockets, as the kubelet calls the old instance again when its endpoint returns to it: a rollout undone, the new pod deleted): the old instance does not see what the new one wrote to the node since it started", target)}
	}
	return reverseResult{}
}

// report records r in the case: the driver's failure, or why it was not
// tried (a note).
func (r reverseResult) report(t *check) {
	switch {
	case r.finding != "":
		t.Errorf("%s", reverseText(r.finding))
	case r.why != "":
		t.addNote("the reverse direction (published by the new instance, unpublished by the old one) not tried: " + r.why)
		t.Logf("the reverse direction not tried: %s", r.why)
	default:
		t.Logf("reverse direction: the old instance unpublished a volume the new instance published (verify's own calls on both sockets)")
	}
}

// reverseText is the reverse direction's verdict with the fix.
func reverseText(finding string) string {
	return finding + ". Fix: keep what NodeUnpublishVolume needs on the node (a hostPath directory both pods mount, or the mount table), read it on each call, not once at start. See " + ReadinessDoc
}
