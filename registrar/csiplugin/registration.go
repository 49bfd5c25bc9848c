package csiplugin

import (
	"encoding/json"
	"fmt"
)

// ParseNodeIDAnnotation decodes the value of the Node annotation
// NodeIDAnnotation: a JSON map of driver names to node IDs. An empty value
// (or JSON null) decodes to an empty map. The error, if any, says what the
// value is not; the map is then nil.
func ParseNodeIDAnnotation(value string) (map[string]string, error) {
	m := map[string]string{}
	if value == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(value), &m); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON map of driver names to node IDs: %w", NodeIDAnnotation, err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

// Registration is what the kubelet's CSI handler wrote to the API server
// for one driver on one node: its entry in the node's CSINode, and its key
// in the Node annotation NodeIDAnnotation. It holds plain values, so that a
// caller with client-go, one with its own JSON types and a test can all
// ask the same question.
type Registration struct {
	// InCSINode: the CSINode's spec.drivers has an entry for the driver;
	// CSINodeID is that entry's node ID.
	InCSINode bool
	CSINodeID string
	// Annotated: the Node annotation has the driver as a key;
	// AnnotationID is the node ID it maps the driver to.
	Annotated    bool
	AnnotationID string
}

// Registered reports whether the kubelet has the driver registered on the
// node: the CSINode lists it with a node ID, and the Node annotation maps
// it to the same node ID. The kubelet writes both on every registration
// (the annotation first) and removes both when the driver's socket goes; a
// node where only one is there, or where they disagree, is half-way or
// left over, and a volume operation there may fail.
func (r Registration) Registered() bool {
	return r.InCSINode && r.CSINodeID != "" && r.Annotated && r.AnnotationID == r.CSINodeID
}

// Absent reports that the kubelet wrote nothing for the driver: no CSINode
// entry, no annotation key (never registered, or unregistered cleanly).
func (r Registration) Absent() bool { return !r.InCSINode && !r.Annotated }

// Problem says what keeps Registered from holding, "" when it holds: what
// the kubelet wrote, and what is missing or disagrees.
func (r Registration) Problem() string {
	switch {
	case r.Registered():
		return ""
	case r.Absent():
		return "the kubelet has not registered it (no CSINode entry, no Node annotation)"
	case r.InCSINode && !r.Annotated:
		return fmt.Sprintf("the CSINode lists it (node ID %q), the Node's annotation %s does not", r.CSINodeID, NodeIDAnnotation)
	case !r.InCSINode:
		return fmt.Sprintf("the Node's annotation %s names it (node ID %q), the CSINode does not list it", NodeIDAnnotation, r.AnnotationID)
	case r.CSINodeID == "":
		return "the CSINode entry has no node ID"
	}
	return fmt.Sprintf("the CSINode and the Node's annotation disagree: node ID %q vs %q", r.CSINodeID, r.AnnotationID)
}
