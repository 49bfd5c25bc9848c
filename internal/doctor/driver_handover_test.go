package doctor

import (
	"strings"
	"testing"
)

func TestHandoverText(t *testing.T) {
	const reg = "/var/lib/kubelet/plugins_registry/stub.csi.example.com-reg.sock"
	got := handoverText("5b1f0c2e-3d4a-4e5f-8a9b-0c1d2e3f4a5b.sock", reg, true)
	for _, want := range []string{"the driver of the pod with UID 5b1f0c2e-3d4a-4e5f-8a9b-0c1d2e3f4a5b now", "Every running instance holds the registration socket " + reg} {
		if !strings.Contains(got, want) {
			t.Errorf("a pod's socket, the rendezvous there: %q, want it to contain %q", got, want)
		}
	}
	got = handoverText("pod-a.sock", reg, false)
	for _, want := range []string{"the driver listening on pod-a.sock now", "No rendezvous .csi-registrar-handover.sock"} {
		if !strings.Contains(got, want) {
			t.Errorf("another name, no rendezvous: %q, want it to contain %q", got, want)
		}
	}
}
