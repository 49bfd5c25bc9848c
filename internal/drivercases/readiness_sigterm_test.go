package drivercases

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/utils/exec"
)

// TestProbeOwn: R4's probe, run in a registrar container, is the driver's
// answer when it exits, except when it was killed (137) in a pod being
// deleted: that pod's container stopped under it, and the probe is asked
// again (on kind, slice 3 once failed R4 on manifests/ this way, 0.4 s after
// SIGTERM, though the driver served 5 s).
func TestProbeOwn(t *testing.T) {
	// As the API's exec returns a command's exit (internal/verify's ExecIn wraps it).
	exited := func(code int) error {
		return fmt.Errorf("pod ns/p, container registrar: %w: ", utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code})
	}
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "live"}}
	deleting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &metav1.Time{}}}
	own := &VerifyError{Err: errors.New("the API server's stream broke")}
	for _, c := range []struct {
		name string
		from *corev1.Pod
		err  error
		own  bool
	}{
		{"killed in a pod being deleted", deleting, exited(137), true},
		{"killed in a live pod", live, exited(137), false},
		{"the probe's failure in a pod being deleted", deleting, exited(1), false},
		{"the probe's failure", live, exited(1), false},
		{"verify's own", live, own, true},
	} {
		got := probeOwn(c.from, c.err)
		if (got != nil) != c.own || got != nil && !VerifysOwn(got) {
			t.Errorf("%s: probeOwn = %v, want own %v", c.name, got, c.own)
		}
		if c.own && c.err != own && !strings.Contains(got.Error(), "pod old, which is being deleted") {
			t.Errorf("%s: %q does not name the pod", c.name, got)
		}
	}
}
