package driverspec

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// DaemonSetIn returns the one DaemonSet of rendered manifests (YAML
// documents, as Parse reads them), decoded strictly: a field the API does
// not know is an error.
func DaemonSetIn(rendered []byte) (*appsv1.DaemonSet, error) {
	objs, err := splitObjects(rendered)
	if err != nil {
		return nil, err
	}
	var found *appsv1.DaemonSet
	for _, o := range objs {
		if k, _ := o["kind"].(string); k != "DaemonSet" {
			continue
		}
		js, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		ds := &appsv1.DaemonSet{}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(ds); err != nil {
			return nil, fmt.Errorf("DaemonSet: %w", err)
		}
		if found != nil {
			return nil, fmt.Errorf("two DaemonSets, %s and %s: want one", found.Name, ds.Name)
		}
		found = ds
	}
	if found == nil {
		return nil, fmt.Errorf("no DaemonSet")
	}
	return found, nil
}
