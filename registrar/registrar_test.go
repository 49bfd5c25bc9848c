package registrar_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

const stubName = "stub.csi.example.com"

// rowRegistrationAsKubeletDoes runs the driver and the registrar and then
// performs the kubelet's steps 4-6 against the registration socket.
func rowRegistrationAsKubeletDoes(t *testing.T) {
	s := startServed(t, nil) // the kubelet dials the driver at s.e.driverSock (newRegistrar)

	if st, err := os.Stat(s.sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("registration socket mode = %v (err %v), want 0600", st.Mode().Perm(), err)
	}
	if code, body := get(s.r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for kubelet") {
		t.Errorf("/readyz before the kubelet = %d %q, want 503 naming \"waiting for kubelet\"", code, body)
	}

	reg, err := registrartest.Register(context.Background(), s.sock)
	if err != nil {
		t.Fatal(err)
	}
	if reg.Err != nil {
		t.Fatalf("kubelet-side validation rejected the registration: %v", reg.Err)
	}
	if reg.Info.Type != registerapi.CSIPlugin || reg.Info.Name != stubName || reg.Info.Endpoint != s.e.driverSock {
		t.Errorf("GetInfo = {Type %q Name %q Endpoint %q}, want {%q %q %q}", reg.Info.Type, reg.Info.Name,
			reg.Info.Endpoint, registerapi.CSIPlugin, stubName, s.e.driverSock)
	}
	if got := reg.Info.SupportedVersions; len(got) != 1 || got[0] != "1.0.0" {
		t.Errorf("SupportedVersions = %v, want [1.0.0]", got)
	}
	ni := reg.NodeInfo
	if ni.GetNodeId() != "node-1" || ni.GetMaxVolumesPerNode() != 7 ||
		ni.GetAccessibleTopology().GetSegments()["topology.stub.csi.example.com/zone"] != "zone-a" {
		t.Errorf("NodeGetInfo = %v, want node-1, 7 volumes, zone-a", ni)
	}
	awaitStatus(t, s.r, "stage registered after Notify(true)", stageIs(registrar.StageRegistered))
	if code, body := get(s.r, "/readyz"); code != http.StatusOK || !strings.Contains(body, "registered") {
		t.Errorf("/readyz after Notify(true) = %d %q, want 200 registered", code, body)
	}

	const why = "CSINode update failed: test"
	if err := registrartest.NotifySocket(context.Background(), s.sock, false, why); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, s.r, "stage rejected after Notify(false)", stageIs(registrar.StageRejected))
	if code, body := get(s.r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, why) {
		t.Errorf("/readyz after Notify(false) = %d %q, want 503 with the kubelet's error", code, body)
	}
	_, metrics := get(s.r, "/metrics")
	for _, want := range []string{
		`csi_registrar_getinfo_calls_total 1`,
		`csi_registrar_kubelet_notifications_total{outcome="registered"} 1`,
		`csi_registrar_kubelet_notifications_total{outcome="rejected"} 1`,
		`csi_registrar_registration_stage{stage="kubelet_rejected"} 1`,
		`csi_registrar_socket_creations_total{reason="start"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
}

// rowExitRemovesSocket: cancelling Run stops serving and removes the socket.
func rowExitRemovesSocket(t *testing.T) {
	s := startServed(t, nil)
	if err := s.run.stop(t); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	wantStage(t, s.r, registrar.StageStopped)
	if _, err := os.Lstat(s.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("registration socket still there after exit (err %v)", err)
	}
}

// rowExitKeepsReplacedFile: at exit the path is removed only if it still is
// the socket this process created.
func rowExitKeepsReplacedFile(t *testing.T) {
	s := startServed(t, nil)
	// Replace it behind the registrar's back (atomically, so that it cannot
	// re-create its socket in between), then stop.
	tmp := filepath.Join(s.e.regDir, ".other")
	if err := os.WriteFile(tmp, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.sock); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, s.r, "the file noticed", stageIs(registrar.StageSocketNotASocket))
	s.run.stop(t)
	if b, err := os.ReadFile(s.sock); err != nil || string(b) != "not yours" {
		t.Fatalf("the file put at the path was touched: %q, %v", b, err)
	}
}

// rowStaleSocketReplaced: a socket nobody serves is removed and replaced.
func rowStaleSocketReplaced(t *testing.T) {
	e := newEnv(t)
	sock := e.regSock(stubName)
	registrartest.StaleSocket(t, sock)
	if answers(sock) {
		t.Fatal("the stale socket answers")
	}
	startStubDriver(t, e, stubName)
	r, _ := startRegistrar(t, e, nil, nil)
	// (Inode numbers are reused at once on tmpfs, so "answers" is the test.)
	awaitStatus(t, r, "an answering registration socket", serving(sock))
}

// rowLiveSocketNotRemoved: a socket another process serves is never
// unlinked; the conflict shows on /readyz; once the other side goes away the
// registrar takes the path without a restart.
func rowLiveSocketNotRemoved(t *testing.T) {
	e := newEnv(t)
	sock := e.regSock(stubName)
	other, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() { // answer connections like a live registrar would
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	theirs := inode(t, sock)
	var logs logBuffer
	startStubDriver(t, e, stubName)
	r, _ := startRegistrar(t, e, &logs, func(o *registrar.Options) { o.RegistrationRetryMax = time.Second })
	awaitStatus(t, r, "socket conflict stage", stageIs(registrar.StageSocketConflict))
	if code, body := get(r, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "socket conflict") {
		t.Errorf("/readyz = %d %q, want 503 naming the socket conflict", code, body)
	}
	if !strings.Contains(logs.String(), "outcome=conflict") {
		t.Errorf("no conflict in the log:\n%s", logs.String())
	}
	// Let it retry a few times: the other socket must survive every attempt.
	awaitLog(t, &logs, "two conflict log lines", logAtLeast("outcome=conflict", 2))
	if inode(t, sock) != theirs {
		t.Fatal("the live socket of another process was replaced")
	}
	other.Close() // unlinks the path: the registrar may take it now
	awaitStatus(t, r, "registrar serving after the other process left", serving(sock))
}

// rowNonSocketRefused: a regular file, a directory or a symlink at the
// registration path is refused and left as it was.
func rowNonSocketRefused(t *testing.T) {
	for _, kind := range []string{"file", "directory", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t)
			sock := e.regSock(stubName)
			switch kind {
			case "file":
				os.WriteFile(sock, []byte("keep me"), 0o600)
			case "directory":
				os.Mkdir(sock, 0o700)
			case "symlink":
				os.Symlink("/nonexistent", sock)
			}
			before, _ := os.Lstat(sock)
			startStubDriver(t, e, stubName)
			r, run := startRegistrar(t, e, nil, nil)
			awaitStatus(t, r, "not a socket", stageIs(registrar.StageSocketNotASocket))
			if !strings.Contains(r.Status().Detail, "not a socket") {
				t.Errorf("status detail %q does not say it is not a socket", r.Status().Detail)
			}
			run.stop(t)
			after, err := os.Lstat(sock)
			if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Fatalf("the %s at the registration path was changed (err %v)", kind, err)
			}
		})
	}
}

// rowDriverNameValidated: names the kubelet or the file system cannot take
// are refused before anything is created.
func rowDriverNameValidated(t *testing.T) {
	for _, name := range []string{"../../evil", "", strings.Repeat("a", 200), "a/b", "a_b", "a\nb", "-a", "a.", "a..b"} {
		t.Run(strings.ReplaceAll(name, "/", "|"), func(t *testing.T) {
			e := newEnv(t)
			serveNamedDriver(t, e.driverSock, &namedDriver{name: name})
			r, err := runUntilError(t, e, e.driverSock)
			if !csiplugin.IsValidationError(err) {
				t.Fatalf("Run = %v, want a validation error", err)
			}
			if !strings.Contains(err.Error(), "driver name") {
				t.Errorf("error %q does not say what was wrong", err)
			}
			if ents, _ := os.ReadDir(e.regDir); len(ents) != 0 {
				t.Errorf("registration dir not empty: %v", ents)
			}
			if ents, _ := os.ReadDir(filepath.Dir(e.regDir)); len(ents) != 2 {
				t.Errorf("something was created beside the registration dir: %v", ents)
			}
			if st := r.Status().Stage; st != registrar.StageStopped {
				t.Errorf("stage %v after Run returned, want stopped", st)
			}
		})
	}
}
