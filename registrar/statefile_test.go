package registrar_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/registrartest"
)

// probeAnswer is ProbeState's answer as one string, and whether it passed.
func probeAnswer(path string) (string, bool) {
	state, err := registrar.ProbeState(path)
	if err != nil {
		return err.Error(), false
	}
	return state, true
}

// TestStateFileFollowsRun: a Registrar with Options.StateFile keeps in it
// each stage of a real registration (a kubelet-style client on its socket,
// the reference driver), ProbeState passes only once the kubelet confirmed,
// and the file is gone when Run returns.
func TestStateFileFollowsRun(t *testing.T) {
	platformtest.SkipUnderEmulation(t, "the probe compares the writer's recorded start time with /proc/<pid>/stat, which the emulator answers per thread, not per process")
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "registrar.state")
	r, run := startRegistrar(t, e, nil, func(o *registrar.Options) { o.StateFile = path })
	sock := e.regSock(stubName)

	want := func(stage registrar.Stage, ok bool, message ...string) {
		t.Helper()
		// The file is written before the Status is published.
		wantStage(t, r, stage)
		got, passed := probeAnswer(path)
		if passed != ok || !containsAll(got, message...) {
			t.Errorf("at %s: ProbeState = %q (passed %v); want passed %v and %q", stage, got, passed, ok, message)
		}
	}
	want(registrar.StageWaitingForDriver, false, "not registered: waiting for driver for ")

	startStubDriver(t, e, stubName)
	want(registrar.StageWaitingForKubelet, false, "not registered: waiting for kubelet for ", "(driver "+stubName+", pid ")

	if err := registrartest.Reject(context.Background(), sock, "kubelet says no"); err != nil {
		t.Fatal(err)
	}
	want(registrar.StageRejected, false, "not registered: kubelet rejected for ", "kubelet says no")

	// The socket is re-created after the backoff; the kubelet registers it.
	awaitStatus(t, r, "a new registration socket", servingNew(r, sock, "rejected", 1))
	registerNow(t, r, sock)
	want(registrar.StageRegistered, true, "registered for ", "(driver "+stubName+", pid ")

	// Only what the probe needs is in the file.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if w := []string{"confirmed", "driver", "format", "pid", "since", "stage", "start"}; !reflect.DeepEqual(keys, w) {
		t.Errorf("state file fields %v, want %v:\n%s", keys, w, data)
	}
	entries, _ := os.ReadDir(e.regDir)
	for _, en := range entries {
		if strings.Contains(en.Name(), "state") {
			t.Errorf("registration directory holds %v", entries)
		}
	}

	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, passed := probeAnswer(path); passed || !strings.Contains(got, "no registrar is running in this container: no state file "+path) {
		t.Errorf("after Run returned: ProbeState = %q (passed %v), want no state file", got, passed)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
		t.Errorf("left in the state file's directory: %v", entries)
	}
}

// TestStateFileOption: New refuses a state file in the registration
// directory, where the kubelet would find it.
func TestStateFileOption(t *testing.T) {
	e := newEnv(t)
	_, err := registrar.New(registrar.Options{CSIAddress: e.driverSock, KubeletRegistrationPath: e.driverSock,
		PluginRegistrationPath: e.regDir, StateFile: filepath.Join(e.regDir, "x.state")})
	var oe *registrar.OptionError
	if !errors.As(err, &oe) || oe.Option != registrar.OptionStateFile || !strings.Contains(err.Error(), "which the kubelet watches") {
		t.Fatalf("New = %v, want an *OptionError of StateFile naming the rule", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
