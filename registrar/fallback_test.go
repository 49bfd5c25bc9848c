package registrar_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// fakeKubeletRejectingLargeVersions plays a kubelet whose CSI handler
// parses a version's minor as a 32-bit number (the kubelets the mode is
// proven with, 1.34-1.37, parse 64 bits): a registration whose versions
// all fail to parse is refused in ValidatePlugin with the words of the
// kubelet's plugin manager and CSI handler; any other is registered as the
// kubelet does (registrartest.Register). It returns the kubelet's error,
// "" when it registered the socket.
func fakeKubeletRejectingLargeVersions(t *testing.T, socketPath string) string {
	t.Helper()
	info, err := registrartest.GetInfoSocket(t.Context(), socketPath)
	if err != nil {
		t.Fatalf("GetInfo on %s: %v", socketPath, err)
	}
	for _, v := range info.GetSupportedVersions() {
		parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
		if len(parts) == 3 && parts[0] == "1" {
			if _, err := strconv.ParseUint(parts[1], 10, 32); err == nil {
				if reg, err := registrartest.Register(t.Context(), socketPath); err != nil || reg.Err != nil {
					t.Fatalf("registering %s: %v, %v", socketPath, err, reg)
				}
				return ""
			}
		}
	}
	msg := fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver %s at endpoint %s: "+
		"ValidatePlugin for CSI driver %q failed. None of the versions specified %q are supported. err=could not find a highest supported version from versions (%v) reported: strconv.ParseUint: value out of range",
		info.GetName(), info.GetEndpoint(), info.GetName(), info.GetSupportedVersions(), info.GetSupportedVersions())
	if err := registrartest.NotifySocket(t.Context(), socketPath, false, msg); err != nil {
		t.Fatalf("notifying %s: %v", socketPath, err)
	}
	return msg
}

// A kubelet that cannot take the mode's version 1.<v>.0 refuses the first
// announcement in ValidatePlugin: the instance unlinks it by name, leaves
// the mode (its birth file goes, the fallback is counted) and registers as
// the plain registrar does, on <driver>-reg.sock with 1.0.0, which that
// kubelet registers. On exit it unlinks the plain socket by name.
func TestRollingUpdateFallsBackWhenTheKubeletRefusesTheVersion(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	in := startInstance(t, e, clk, "pod-a")
	sock := in.serving(t, "")
	birth := filepath.Join(e.regDir, csiplugin.BirthFileName(stubName, csiplugin.InstanceID("pod-a")))
	if _, err := os.Stat(birth); err != nil {
		t.Fatalf("the mode's birth file: %v", err)
	}
	refused := fakeKubeletRejectingLargeVersions(t, sock)
	if refused == "" {
		t.Fatalf("the fake kubelet registered %s; it refuses a 13-digit minor", sock)
	}

	plain := e.regSock(stubName)
	st := awaitStatus(t, in.r, "the plain socket served", func(st registrar.Status) bool {
		return st.Stage == registrar.StageWaitingForKubelet && st.SocketPath == plain
	})
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	served := "socket=" + plain + " reason=start outcome=serving" // the status names it before it listens
	if _, err := in.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, served) }); err != nil {
		t.Fatalf("the plain socket is not served: %v\n%s", err, in.logs.String())
	}
	if isSocket(sock) {
		t.Errorf("the refused announcement %s is still there", sock)
	}
	if _, err := os.Stat(birth); !os.IsNotExist(err) {
		t.Errorf("the mode's birth file after the fallback: %v, want gone", err)
	}
	if _, err := in.logs.Wait(ctx, func(s string) bool { return strings.Contains(s, "decision=fallback") }); err != nil {
		t.Fatalf("no fallback decision logged: %v\n%s", err, in.logs.String())
	}
	if m := metric(in.r); !strings.Contains(m, `csi_registrar_rolling_update_decisions_total{decision="fallback"} 1`) {
		t.Errorf("the fallback is not counted:\n%s", m)
	}
	if got := fakeKubeletRejectingLargeVersions(t, plain); got != "" {
		t.Fatalf("the plain socket was refused too (%s): %s", st.SocketPath, got)
	}
	awaitStatus(t, in.r, "registered", stageIs(registrar.StageRegistered))
	if s := in.logs.String(); strings.Count(s, "decision=announce") != 1 {
		t.Errorf("announcements after the fallback (want the first only):\n%s", s)
	}

	// Without the mode, the exit unlinks by name at once: no successorWait.
	in.run.cancel()
	if err := returned(t, in.run, "the fallen-back instance"); err != nil {
		t.Fatal(err)
	}
	if isSocket(plain) {
		t.Errorf("the plain socket %s is left after the exit", plain)
	}
}

// A rejection in validation that does not refuse the version (the CSI
// handler's "a higher version is already registered") is the mode's
// ordinary withdraw: no fallback.
func TestRollingUpdateHigherVersionRejectionIsNoFallback(t *testing.T) {
	e := newEnv(t)
	clk := registrar.NewFakeClock()
	in := startInstance(t, e, clk, "pod-a")
	sock := in.serving(t, "")
	msg := "RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver " + stubName +
		": Another driver with the same name is already registered with a higher supported version: \"1.99999999999999.0\""
	if err := registrartest.NotifySocket(t.Context(), sock, false, msg); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, in.r, "rejected", stageIs(registrar.StageRejected))
	if s := in.logs.String(); strings.Contains(s, "decision=fallback") || !strings.Contains(s, "decision=withdraw") {
		t.Errorf("want a withdraw and no fallback:\n%s", s)
	}
}
