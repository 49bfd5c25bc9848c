package kubeletlog

import (
	"strings"
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

func TestVolumeErrors(t *testing.T) {
	since := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	log := strings.Join([]string{
		`E1126 09:59:59.000000  1 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/aaaa-inline podName:aaaa nodeName:}" failed. Error: UnmountVolume.TearDown failed for volume "inline" (UniqueName: "kubernetes.io/csi/aaaa-inline") pod "aaaa" (UID: "aaaa") : old, before since`,
		`E1126 10:00:01.000000  1 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/aaaa-inline podName:aaaa nodeName:}" failed. No retries permitted until x. Error: UnmountVolume.TearDown failed for volume "inline" (UniqueName: "kubernetes.io/csi/aaaa-inline") pod "aaaa" (UID: "aaaa") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = NotFound desc = volume csi-1 is not known`,
		`E1126 10:00:02.000000  1 nestedpendingoperations.go:348] Operation failed. Error: UnmountVolume.TearDown failed for volume "inline" (UniqueName: "kubernetes.io/csi/bbbb-inline") pod "bbbb" (UID: "bbbb") : kubernetes.io/csi: Unmounter.TearDownAt failed to clean mount dir [/x]: busy`,
		`E1126 10:00:03.000000  1 nestedpendingoperations.go:348] Error: MountVolume.SetUp failed for volume "inline" (UniqueName: "kubernetes.io/csi/cccc-inline") pod "p" (UID: "cccc") : rpc error: code = Unavailable desc = gone`,
	}, "\n")
	got := VolumeErrors(log, OpTearDown, since)
	if len(got) != 2 {
		t.Fatalf("VolumeErrors = %v, want aaaa and bbbb", got)
	}
	if a := got["aaaa"]; a.Code != "NotFound" || a.Desc != "volume csi-1 is not known" || a.Cause() != "NotFound: volume csi-1 is not known" {
		t.Errorf("aaaa: %+v", a)
	}
	if b := got["bbbb"]; b.Code != "" || b.Cause() != "kubernetes.io/csi: Unmounter.TearDownAt failed to clean mount dir [/x]: busy" {
		t.Errorf("bbbb: %+v (cause %q)", b, b.Cause())
	}
	if c := VolumeErrors(log, OpSetUp, since)["cccc"]; c.Code != "Unavailable" {
		t.Errorf("cccc: %+v", c)
	}
}
