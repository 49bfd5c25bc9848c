package newdriver

import (
	"strings"
	"testing"
)

// TestBaseKubeletDir: with another kubelet root every host path of the
// project's DaemonSet is under it, and no value names /var/lib/kubelet.
func TestBaseKubeletDir(t *testing.T) {
	const root = "/var/lib/k0s/kubelet"
	o := Options{Module: "example.com/acme-csi", Driver: "acme.csi.example.com", KubeletDir: root, Source: checkout(t)}
	src, err := readSource(o.Source)
	if err != nil {
		t.Fatal(err)
	}
	files, err := transformBase(src.base, baseEdits(), baseForbidden(), o.templateData(), o.baseHeader)
	if err != nil {
		t.Fatal(err)
	}
	var ds string
	for _, f := range files {
		if f.path == baseDir+"/daemonset.yaml" {
			ds = string(f.data)
		}
		if f.path == baseDir+"/status-clusterroles.yaml" {
			t.Errorf("%s is generated: the rbac edit drops it", f.path)
		}
	}
	for _, want := range []string{
		"path: " + root + "/plugins/acme.csi.example.com/\n",
		"path: " + root + "/plugins_registry/\n",
		"path: " + root + "/pods\n",
		"mountPath: " + root + "/pods\n",
		"- --kubelet-pods-dir=" + root + "/pods\n",
		"value: " + root + "/plugins/acme.csi.example.com/$(POD_UID).sock\n",
	} {
		if !strings.Contains(ds, want) {
			t.Errorf("the DaemonSet lacks %q:\n%s", want, ds)
		}
	}
	for _, line := range strings.Split(ds, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") && strings.Contains(line, "/var/lib/kubelet") {
			t.Errorf("the DaemonSet still names /var/lib/kubelet: %s", line)
		}
	}
}

// TestBaseEditNoLongerFits: a base whose content an edit does not find as
// declared fails the generation with the edit's name and what it found.
func TestBaseEditNoLongerFits(t *testing.T) {
	o := Options{Module: "example.com/acme-csi", Driver: "acme.csi.example.com", Source: checkout(t)}
	src, err := readSource(o.Source)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"command changed", `command: ["/csi-registrar", "driver"]`, `command: ["/csi-registrar", "driver", "--v=4"]`,
			`base edit "driver-command"`},
		{"probe variable renamed", "CSI_REGISTRAR_PROBE_CSI_ADDRESS", "PROBE_ADDRESS", `base edit "probe-env"`},
		{"a new reference to the docs", "# kubectl logs/exec without -c: the driver.", "# kubectl logs: docs/operating.md.",
			`"docs/" in`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := map[string][]byte{}
			for k, v := range src.base {
				base[k] = v
			}
			ds := string(base["daemonset.yaml"])
			if !strings.Contains(ds, tc.from) {
				t.Fatalf("manifests/base/daemonset.yaml has no %q: update the test", tc.from)
			}
			base["daemonset.yaml"] = []byte(strings.Replace(ds, tc.from, tc.to, 1))
			_, err := transformBase(base, baseEdits(), baseForbidden(), o.templateData(), o.baseHeader)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %s", err, tc.want)
			}
			t.Log(err)
		})
	}
}
