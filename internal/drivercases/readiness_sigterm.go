package drivercases

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// R4. The driver keeps serving a few seconds after SIGTERM: the pod is
// deleted (the kubelet sends SIGTERM at once) and its instance's socket is
// asked every 250 ms until it stops answering; the kubelet may still call
// it while the next instance takes over.
func (s *suite) servesAfterTerm(t *check) {
	ctx, n, _ := s.begin(t)
	if s.blockRoll != "" {
		t.Skipf("R1: %s", s.blockRoll)
	}
	pod := s.podOn(t, ctx, n)
	sock := s.socketFor(pod)
	serving, how := s.servingProbe(ctx, pod, sock)
	if ok, why, own := serving(ctx); !ok {
		if own != nil {
			t.Fatal(own)
		}
		t.notJudged("the driver's socket %s does not answer before the delete (%s), so whether it serves after SIGTERM cannot be told. See %s", sock, why, ReadinessDoc)
	}
	was, err := s.podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := s.cl.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	var why string
	var owns []string
	for time.Since(t0) < serveWatch {
		ok, w, own := serving(ctx)
		if own != nil {
			owns = append(owns, own.Error()) // no answer either way: ask again
		} else if !ok {
			why = w
			break
		} else {
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	served := last.Sub(t0)
	if last.IsZero() {
		served = 0
	}
	if len(owns) > 0 {
		t.Logf("%d of verify's own asks got no answer (tried again): %s", len(owns), owns[len(owns)-1])
	}
	t.measure("pod delete (SIGTERM) -> the driver's socket answers no more ("+how+")", served)
	if why != "" && served < minServeAfterTerm && s.socketThief && s.socketGone(ctx, pod.Spec.NodeName, sock) {
		t.notJudged("the driver's socket %s was removed %.1f s after SIGTERM, and R3 saw the new instance remove the old one's socket: whether this instance serves after SIGTERM cannot be told. Fix R3 first. See %s", path.Base(sock), served.Seconds(), ReadinessDoc)
	} else if why != "" && served < minServeAfterTerm {
		t.Errorf("the driver stopped serving %.1f s after SIGTERM (its socket %s: %s): the kubelet may still call this instance while the next one takes over (a registration in progress, calls in flight), and those calls fail. Fix: on SIGTERM keep serving a few seconds (the reference driver: --shutdown-delay=5s), within terminationGracePeriodSeconds. See %s",
			served.Seconds(), path.Base(sock), why, ReadinessDoc)
	} else {
		t.Logf("the driver served %.1f s after SIGTERM", served.Seconds())
	}
	// Only the deleted pod is replaced: on a cluster of several nodes the
	// others' pods stay.
	if _, err := s.awaitReplaced(ctx, map[types.UID]bool{pod.UID: true}, len(was), rolloutWait); err != nil {
		t.Fatal(err)
	}
}

// socketGone reports whether the socket file is gone on node.
func (s *suite) socketGone(ctx context.Context, node, sock string) bool {
	out, err := s.cl.Node.NodeSh(ctx, node, `[ -e "$1" ] && echo present || echo gone`, sock)
	return err == nil && strings.TrimSpace(out) == "gone"
}

// PodExec runs argv in a container of a pod (the API's exec): R4 asks the
// driver from the registrar's container, on the node, where verify cannot
// dial the node's sockets. verify's node pods implement it.
type PodExec interface {
	ExecIn(ctx context.Context, namespace, pod, container string, argv ...string) (string, error)
}

// servingProbe returns how R4 asks whether the instance serves (ok), or
// that verify's own means failed this time (own: not an answer): GetPluginInfo
// and NodeGetInfo on its socket where the node's sockets can be dialed;
// else csi-registrar's probe (the CSI Probe call) run in a registrar
// container of the workload on the node, which mounts the socket directory;
// else whether a process of the pod listens on the socket (sockowner).
func (s *suite) servingProbe(ctx context.Context, pod *corev1.Pod, sock string) (func(context.Context) (ok bool, why string, own error), string) {
	if s.cl.Dialer != nil {
		return func(ctx context.Context) (bool, string, error) {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := AskDriver(cctx, s.cl.Dialer, pod.Spec.NodeName, sock); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		}, "GetPluginInfo and NodeGetInfo"
	}
	if ex, ok := s.cl.Node.(PodExec); ok && s.d.spec.Registrar != "" {
		inContainer := driverspec.ExpandForPod(s.d.spec.CSIAddress, pod, s.d.spec.Registrar)
		probe := func(ctx context.Context) (bool, string, error) {
			from, err := s.registrarOn(ctx, pod.Spec.NodeName)
			if err != nil {
				return false, "", err
			}
			out, err := ex.ExecIn(ctx, from.Namespace, from.Name, s.d.spec.Registrar, "/csi-registrar", "probe", "--csi-address="+inContainer, "--timeout=1s")
			if err != nil {
				return false, strings.TrimSpace(out + " " + err.Error()), probeOwn(from, err)
			}
			return true, "", nil
		}
		if ok, _, err := probe(ctx); ok && err == nil {
			return probe, "csi-registrar probe (CSI Probe) in a registrar container on the node"
		}
	}
	return func(ctx context.Context) (bool, string, error) {
		p, err := s.cl.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if _, err := SocketOwner(ctx, s.cl.Node, p, sock); err != nil {
			if VerifysOwn(err) {
				return false, "", err
			}
			return false, err.Error(), nil
		}
		return true, "", nil
	}, "a process of the pod listens on it"
}

// probeOwn returns the error of a probe run in pod from's registrar
// container when it is verify's own trouble, not the driver's answer: a
// VerifyError, or a probe killed (exit 137, SIGKILL) in a pod being deleted,
// whose container stopped under it (the pod under test may be the only one
// on its node whose registrar the API reports running, until the next
// starts). Else nil: the probe's exit is the driver's answer.
func probeOwn(from *corev1.Pod, err error) error {
	var exit interface{ ExitStatus() int }
	switch {
	case VerifysOwn(err):
		return err
	case from.DeletionTimestamp != nil && errors.As(err, &exit) && exit.ExitStatus() == 128+9:
		return &VerifyError{Err: fmt.Errorf("the probe was killed with the registrar container it ran in, of pod %s, which is being deleted: %w", from.Name, err)}
	}
	return nil
}

// registrarOn returns a pod of the workload on node whose registrar
// container runs, one not being deleted first.
func (s *suite) registrarOn(ctx context.Context, node string) (*corev1.Pod, error) {
	l, err := s.cl.Client.CoreV1().Pods(s.cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.cl.Selector})
	if err != nil {
		return nil, err
	}
	var pick *corev1.Pod
	for i := range l.Items {
		p := &l.Items[i]
		if p.Spec.NodeName != node || ContainerStatus(p, s.d.spec.Registrar).State.Running == nil {
			continue
		}
		if pick == nil || pick.DeletionTimestamp != nil && p.DeletionTimestamp == nil {
			pick = p
		}
	}
	if pick == nil {
		return nil, &VerifyError{Err: fmt.Errorf("no pod of %s on %s with its registrar container running, to ask the driver from", s.cl.Workload, node)}
	}
	return pick, nil
}
