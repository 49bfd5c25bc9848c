package nodestatus

import "github.com/csi-registrar/csi-registrar/registrar/csiplugin"

// registration is what the latest Node and CSINode say of the driver.
func registration(s *state) csiplugin.Registration {
	var reg csiplugin.Registration
	reg.CSINodeID, reg.InCSINode = s.csinode.driverNodeID(s.st.DriverName)
	if s.node != nil {
		if m, err := csiplugin.ParseNodeIDAnnotation(s.node.Metadata.Annotations[csiplugin.NodeIDAnnotation]); err == nil {
			reg.AnnotationID, reg.Annotated = m[s.st.DriverName]
		}
	}
	return reg
}

// driverNodeID returns the node ID of driver's entry, and whether there is one.
func (c *CSINode) driverNodeID(driver string) (string, bool) {
	if c == nil {
		return "", false
	}
	for _, d := range c.Spec.Drivers {
		if d.Name == driver {
			return d.NodeID, true
		}
	}
	return "", false
}
