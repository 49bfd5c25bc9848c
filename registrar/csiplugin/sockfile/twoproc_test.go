package sockfile_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin/sockfile"
)

// childEnv makes the test binary run contend (below) instead of the tests:
// the second registrar of TestTwoProcessesNeverTakeEachOthersSocket.
const childEnv = "SOCKFILE_TEST_CONTEND"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		n, _ := strconv.Atoi(os.Getenv(childEnv + "_N"))
		fmt.Println("ready", runtime.GOARCH) // the parent starts contending when it reads this
		if err := contend(path, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// contend takes the path n times (more, up to 10n, until it won once). Each
// time it owns the socket it checks, across a few scheduler yields, that the
// path still is its socket, then dies the way a killed process does
// (Abandon): the dead socket it leaves is what the other process takes over
// next.
func contend(path string, n int) error {
	won := 0
	for i := 0; i < n || (won == 0 && i < 10*n); i++ {
		s, err := sockfile.Listen(path)
		if err != nil {
			continue
		}
		won++
		for range 20 {
			runtime.Gosched()
			if !s.Owned() {
				return fmt.Errorf("pid %d, round %d: our fresh socket at %s was removed or replaced by the other process", os.Getpid(), i, path)
			}
		}
		sockfile.Abandon(s)
	}
	if won == 0 {
		return fmt.Errorf("pid %d: never owned %s in %d rounds", os.Getpid(), path, n)
	}
	return nil
}

// Issue 13 (stale-socket removal race): two registrars keep taking over the
// dead socket the other leaves. Between one's "the socket is dead" and its
// removal, the other must not be able to create a fresh socket that then gets
// deleted: each checks it still owns what it created.
func TestTwoProcessesNeverTakeEachOthersSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x-reg.sock")
	const rounds = 3000
	// The test binary again, on this platform: under an emulator
	// (make test-platforms), through it; exec.Command(os.Args[0]) would not
	// run a foreign binary there.
	child := platformtest.SelfCommand("-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+path, childEnv+"_N="+strconv.Itoa(rounds))
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut := &bytes.Buffer{}
	child.Stderr = errOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// Contend only once the child does: on a loaded machine its start-up can
	// take longer than all of our rounds.
	rd := bufio.NewReader(stdout)
	// The child names its GOARCH: the same as ours, also under an emulator.
	if line, err := rd.ReadString('\n'); err != nil || line != "ready "+runtime.GOARCH+"\n" {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the second process did not start: %q %v: %s", line, err, errOut)
	}
	mine := contend(path, rounds)
	rest, _ := io.ReadAll(rd) // before Wait, which closes the pipe
	childErr := child.Wait()  // after it, errOut is no longer written
	out := append(rest, errOut.Bytes()...)
	if mine != nil {
		t.Error(mine)
	}
	if childErr != nil {
		t.Errorf("the second process: %v: %s", childErr, out)
	}
}
