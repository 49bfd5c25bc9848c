package sockfile_test

import (
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/platformtest"
)

// TestPlatform checks that this test binary runs as the platform it was
// built for (and as $CSI_REGISTRAR_TEST_GOARCH), and prints that platform:
// make test-platforms runs this package for every platform of a release
// under an emulator and looks for the line.
func TestPlatform(t *testing.T) { platformtest.Report(t, nil) }
