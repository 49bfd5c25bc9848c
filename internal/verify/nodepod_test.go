package verify

import (
	"errors"
	"fmt"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	utilexec "k8s.io/client-go/util/exec"
)

func TestExecErrorTellsTheCommandFromVerifysOwnTrouble(t *testing.T) {
	exit := fmt.Errorf("pod ns/p, container node: %w: ", utilexec.CodeExitError{Err: errors.New("command terminated with non-zero exit code: 1"), Code: 1})
	if err := execError(exit); drivercases.VerifysOwn(err) {
		t.Errorf("the command's exit status %v: verify's own, want the node's answer", err)
	}
	stream := errors.New("pod ns/p, container node: dial tcp 127.0.0.1:6443: connect: connection refused: ")
	if err := execError(stream); !drivercases.VerifysOwn(err) {
		t.Errorf("the exec's own failure %v: not verify's own", err)
	}
}
