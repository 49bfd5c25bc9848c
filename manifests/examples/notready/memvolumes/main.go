// Command memvolumes is a CSI node driver that is not ready for csi-registrar's
// handover (--rolling-update), on purpose (tinydriver.Faults.VolumesInMemory): kubectl
// csi-registrar verify -f manifests/examples/notready/memvolumes/ says why. See
// docs/writing-a-driver.md, "Is my driver ready for rolling updates?".
package main

import "github.com/csi-registrar/csi-registrar/manifests/examples/notready/tinydriver"

func main() { tinydriver.Main(tinydriver.Faults{VolumesInMemory: true}) }
