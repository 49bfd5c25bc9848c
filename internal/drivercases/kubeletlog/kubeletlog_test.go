package kubeletlog

import (
	"testing"
	"time"
)

// Lines as the kubelet v1.37 wrote them on the local node, around a restart.
const log = `I1124 06:09:53.978225   23818 reconciler.go:161] "OperationExecutor.RegisterPlugin started" plugin={"SocketPath":"/var/lib/kubelet/plugins_registry/x.example.com-reg.sock"}
I1124 06:09:53.979973   23818 csi_plugin.go:119] kubernetes.io/csi: Register new plugin with name: x.example.com at endpoint: /var/lib/kubelet/plugins/x.example.com/csi.sock
I1124 06:08:01.000000   23000 csi_plugin.go:119] kubernetes.io/csi: Register new plugin with name: x.example.com at endpoint: /var/lib/kubelet/plugins/x.example.com/csi.sock
E1124 06:09:59.000001   23818 goroutinemap.go:150] Operation for "/var/lib/kubelet/plugins_registry/y-reg.sock" failed: RegisterPlugin error -- dial failed
`

func TestTimeReadsDecimal(t *testing.T) {
	ref := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at, ok := Time(`I1124 06:09:53.979973   23818 csi_plugin.go:119] x`, ref)
	if want := time.Date(2026, 11, 24, 6, 9, 53, 979973000, time.UTC); !ok || !at.Equal(want) {
		t.Errorf("Time: %v %v, want %v", at, ok, want)
	}
	if _, ok := Time("no header", ref); ok {
		t.Error("a line without a klog header has a time")
	}
}

func TestAttemptsSince(t *testing.T) {
	since := time.Date(2026, 11, 24, 6, 9, 0, 0, time.UTC)
	n, related := Attempts(log, "x.example.com", since)
	if n != 1 {
		t.Errorf("attempts since 06:09: %d, want 1 (the one at 06:08 is older)", n)
	}
	if len(related) != 3 {
		t.Errorf("related lines %q, want the RegisterPlugin start, the attempt and the other plugin's error", related)
	}
	if n, _ := Attempts(log, "x.example.com", since.Add(time.Hour)); n != 0 {
		t.Errorf("attempts an hour later: %d, want 0", n)
	}
}
