package registrar_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// TestReregister: a registered registrar asked to register again serves a
// new socket at the same path (the kubelet's plugin watcher sees a new
// file), counts it under reason csinode-lost, and is registered again after
// the kubelet's next registration; asked while not registered it refuses.
// WatchStatus's channel closes at the change.
func TestReregister(t *testing.T) {
	c := startClocked(t, nil)
	if err := c.r.Reregister("test"); !errors.Is(err, registrar.ErrNotRegistered) {
		t.Errorf("Reregister before the kubelet confirmed: %v, want ErrNotRegistered", err)
	}
	registerNow(t, c.r, c.sock)
	st, changed := c.r.WatchStatus()
	if st.Stage != registrar.StageRegistered {
		t.Fatalf("WatchStatus: %s", st)
	}
	if err := c.r.Reregister("the CSINode lost the driver"); err != nil {
		t.Fatalf("Reregister: %v", err)
	}
	<-changed // closed by the new socket's stage: no wait needed beyond it
	if st := c.r.Status(); st.Stage != registrar.StageWaitingForKubelet {
		t.Errorf("after Reregister: %s, want waiting for kubelet", st)
	}
	// Removed and created again (the inode number may be reused: the log
	// says what happened to the file).
	for _, msg := range []string{`msg="registration socket removed"`, `msg="registration socket created"`} {
		found := false
		for _, line := range strings.Split(c.logs.String(), "\n") {
			found = found || strings.Contains(line, msg) && strings.Contains(line, "reason=csinode-lost")
		}
		if !found {
			t.Errorf("no log line %s with reason=csinode-lost:\n%s", msg, c.logs)
		}
	}
	if m := metric(c.r); !strings.Contains(m, `csi_registrar_socket_creations_total{reason="csinode-lost"} 1`) {
		t.Errorf("metrics lack the csinode-lost creation:\n%s", m)
	}
	if !strings.Contains(c.logs.String(), "registering again on request") {
		t.Errorf("no log line of the request:\n%s", c.logs)
	}
	registerNow(t, c.r, c.sock)
}
