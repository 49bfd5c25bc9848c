package stubdriver

import (
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestVolumeLock: a second operation on a volume while one is in progress is
// ABORTED (the CSI spec's code for it); other volumes are not held up, and
// the volume is free again once the first operation ends.
func TestVolumeLock(t *testing.T) {
	v := newVolumes(t.TempDir(), DefaultKubeletPodsDir, slog.New(slog.DiscardHandler))
	unlock, err := v.lock("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.lock("a"); status.Code(err) != codes.Aborted {
		t.Errorf("second lock of a busy volume: %v, want Aborted", err)
	}
	unlockB, err := v.lock("b")
	if err != nil {
		t.Fatalf("lock of another volume: %v", err)
	}
	unlockB()
	unlock()
	unlock, err = v.lock("a")
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock()
}
