package main

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecDoctor runs `csi-registrar doctor` against a registry where the
// real driver and registrar processes registered: healthy, exit 0; then with
// a stale socket planted next to them: exit 1 naming it; and --output=json.
func TestExecDoctor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.startRegistrar(t)
	r.waitLog(t, 1, "registration socket created", "outcome=serving")
	args := []string{"doctor", "--plugins-registry=" + f.regDir, "--node-name=" + testNodeID}

	res := runProc(t, binary, args...)
	if res.code != exitOK || !containsAll(res.stdout, testDriver+"-reg.sock", "ok: CSIPlugin "+testDriver, f.driverSock, "ready",
		testTopoKey+"="+testTopoZone, "healthy: 1 socket(s), 1 CSI plugin(s), no findings") || res.stderr != "" {
		t.Fatalf("healthy registry: want exit 0 and the driver listed; %s", res)
	}
	res = runProc(t, binary, append(args, "--node-labels="+testTopoKey+"=zone-b")...)
	if res.code != exitError || !containsAll(res.stdout, "error", testDriver, "collides with the Node's label "+testTopoKey+"=zone-b") {
		t.Errorf("colliding label: want exit 1 naming it; %s", res)
	}

	stale := filepath.Join(f.regDir, "gone.csi.example.com-reg.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	res = runProc(t, binary, args...)
	if res.code != exitError || !containsAll(res.stdout, "SEVERITY", "error", stale, "stale socket", "rm "+stale, "NOT healthy: 1 error(s)") ||
		!containsAll(res.stderr, "not healthy", "1 error(s)") {
		t.Errorf("stale socket: want exit 1 naming it and the fix; %s", res)
	}
	if !isSocket(stale) {
		t.Error("doctor removed the stale socket: it must change nothing")
	}

	res = runProc(t, binary, append(args, "--output=json")...)
	var report struct {
		Entries []struct {
			Path, GetInfo, Ignored string
		}
		Findings []struct{ Severity, Subject, Message, Fix string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &report); err != nil || res.code != exitError {
		t.Fatalf("--output=json: %v; %s", err, res)
	}
	// The two sockets, and the registrar's lock file (a dot-name: listed as
	// ignored, as the kubelet ignores it).
	used := 0
	for _, e := range report.Entries {
		if e.Ignored == "" {
			used++
		}
	}
	if len(report.Findings) != 1 || report.Findings[0].Subject != stale || report.Findings[0].Severity != "error" || used != 2 {
		t.Errorf("--output=json: %+v", report)
	}
}

// TestDoctorBadArguments: arguments that break a rule exit 2 naming the
// value, before anything is read.
func TestDoctorBadArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--output=yaml"}, []string{"--output", `"yaml"`, "text or json"}},
		{[]string{"--timeout=0s"}, []string{"--timeout", "must be positive"}},
		{[]string{"--node-labels=zone"}, []string{`"zone"`, "key=value"}},
		{[]string{"--host-root=host"}, []string{`"host"`, "absolute"}},
		{[]string{"--plugins-registry=reg"}, []string{`"reg"`, "absolute"}},
		{[]string{"--kubeconfig=/nonexistent/kubeconfig"}, []string{"/nonexistent/kubeconfig", "cannot be read"}},
		{[]string{"extra"}, []string{`"extra"`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			res := runProc(t, binary, append([]string{"doctor", "--node-name=n"}, tc.args...)...)
			if res.code != exitBadInput || !containsAll(res.stderr, tc.want...) || res.stdout != "" {
				t.Errorf("want exit 2 naming %q, nothing on stdout; %s", tc.want, res)
			}
		})
	}
}
