package newdriver

import (
	"fmt"
	"strings"
)

// baseEdits are the declared differences between csi-registrar's
// manifests/base (the reference driver and the registrar, both from the
// csi-registrar image) and a generated project's manifests/base/ (the
// project's driver from its own image, the registrar from csi-registrar's),
// in the order they apply. Values are templates over templateData.
// TestDaemonSetDrift compares the two as rendered, outside this list.
func baseEdits() []baseEdit {
	const (
		ds       = "daemonset.yaml"
		driver   = "driver"
		registry = "registrar"
	)
	container := func(name string, p ...string) yamlPath {
		return append(yamlPath{"spec", "template", "spec", "containers", "name=" + name}, p...)
	}
	var edits []baseEdit
	// The names every file takes from the project.
	for _, f := range []string{"namespace.yaml", "csidriver.yaml", ds} {
		edits = append(edits,
			baseEdit{"part-of", "the objects are the project's, not csi-registrar's", f,
				setLabel{"app.kubernetes.io/part-of", "csi-registrar", "[[.Binary]]"}},
			baseEdit{"names", "the workload's names (csi-stub-node, instance csi-stub) are the project's", f,
				replaceText{from: "csi-stub", to: "[[.Binary]]"}})
	}
	edits = append(edits,
		baseEdit{"namespace", "the project's own namespace", "namespace.yaml",
			setScalar{yamlPath{"metadata", "name"}, "csi-registrar", "[[.Binary]]"}},
		baseEdit{"head", "the comment on top says what the project's file is", "csidriver.yaml",
			setComment{nil, "reference driver's volumes", csiDriverHead, false}},
		baseEdit{"driver-name", "the project's driver name", "csidriver.yaml",
			replaceText{from: stubName, to: "[[.Driver]]", comments: true}},

		baseEdit{"head", "the comment on top says what the project's DaemonSet is", ds,
			setComment{nil, "the reference CSI driver and csi-registrar", daemonSetHead, false}},
		baseEdit{"driver-name", "the project's driver name (its sockets, state and topology key)", ds,
			replaceText{from: stubName, to: "[[.Driver]]", comments: true}},
		baseEdit{"state-dir", "the driver's state under /var/lib/<binary>/, not csi-registrar's", ds,
			replaceText{from: stubStateDir, to: "/var/lib/[[.Binary]]/"}},
		baseEdit{"kubelet-dir", "the kubelet's root of -kubelet-dir (csi-registrar's base: components/kubelet-dir rewrites it)", ds,
			replaceText{from: "/var/lib/kubelet", to: "[[.KubeletDir]]"}},
		baseEdit{"driver-image", "the driver runs from the project's image; base runs it from csi-registrar's", ds,
			setScalar{container(driver, "image"), "csi-registrar", "[[.Binary]]"}},
		baseEdit{"driver-command", "the project's image has its binary as entrypoint; base's runs /csi-registrar driver", ds,
			remove{container(driver, "command"), `["/csi-registrar", "driver"]`}},
		baseEdit{"endpoint", "one value for the socket and the probe: the driver's -endpoint reads CSI_ENDPOINT", ds,
			setScalar{container(driver, "args", "=--endpoint=unix:///csi/$(POD_UID).sock"),
				"--endpoint=unix:///csi/$(POD_UID).sock", "--endpoint=$(CSI_ENDPOINT)"}},
		baseEdit{"endpoint-comment", "where the endpoint is set now", ds,
			setComment{container(driver, "args", "=--endpoint=$(CSI_ENDPOINT)"), "in the shared socket directory.",
				"# mode: each pod's driver serves its own CSI socket, named by the\n" +
					"# pod's UID, in the shared socket directory: CSI_ENDPOINT below,\n# which -probe reads too.", false}},
		baseEdit{"kubelet-pods-dir", "the project's driver names the kubelet's pods directory (-kubelet-dir); base's relies on its default", ds,
			insert{container(driver, "args"), "=--state-dir=/var/lib/[[.Binary]]/[[.Driver]]", "--kubelet-pods-dir=[[.KubeletDir]]/pods",
				"# Volumes are published only below the kubelet's pods directory."}},
		baseEdit{"probe-env", "the project's -probe reads its socket from CSI_ENDPOINT, a unix:// URL; csi-registrar probe from CSI_REGISTRAR_PROBE_CSI_ADDRESS", ds,
			setFlow{container(driver, "env", "name=CSI_REGISTRAR_PROBE_CSI_ADDRESS"),
				`{name: "CSI_REGISTRAR_PROBE_CSI_ADDRESS", value: "/csi/$(POD_UID).sock"}`,
				`{name: CSI_ENDPOINT, value: unix:///csi/$(POD_UID).sock}`}},
		baseEdit{"probe-command", "the liveness probe is the project's binary with -probe", ds,
			setFlow{container(driver, "livenessProbe", "exec", "command"), `["/csi-registrar", "probe", "--timeout=3s"]`,
				`["/[[.Binary]]", "-probe", "-timeout=3s"]`}},
		baseEdit{"bench", "the figures are csi-registrar's make bench, which the project does not have", ds,
			replaceText{from: "make bench (docs/performance.md)", to: "csi-registrar's make bench", comments: true}},
		baseEdit{"registration-path", "the kubelet directory is -kubelet-dir's, not a kustomize component's", ds,
			setComment{container(registry, "args", "=--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)"),
				"components/kubelet-dir/", "# The kubelet expands $(DRIVER_REG_SOCK_PATH) from env below, as\n# upstream's manifests do.", false}},
		baseEdit{"mode-doc", "the mode is described in the project's README", ds,
			setComment{container(registry, "args", "=--rolling-update=$(POD_UID)"),
				"docs/design.md", "# mode: announce with this pod's UID (README.md, \"The\n# rolling-update mode\").", false}},

		baseEdit{"head", "the comment on top says what the project's kustomization is", "kustomization.yaml",
			setComment{nil, "The reference CSI node driver and csi-registrar", kustomizationHead, false}},
		baseEdit{"namespace", "the project's own namespace", "kustomization.yaml",
			setScalar{yamlPath{"namespace"}, "csi-registrar", "[[.Binary]]"}},
		baseEdit{"rbac", "the ClusterRoles of kubectl csi-registrar status are csi-registrar's, cluster-wide: two projects would share, and delete, each other's", "kustomization.yaml",
			remove{yamlPath{"resources", "=status-clusterroles.yaml"}, `"status-clusterroles.yaml"`}},
		baseEdit{"rbac", "as kustomization.yaml's", "status-clusterroles.yaml", dropFile{}},
		baseEdit{"driver-image", "the project's image for the driver, beside csi-registrar's for the registrar", "kustomization.yaml",
			insert{yamlPath{"images"}, "", "{name: [[.Binary]], newName: [[.Binary]], newTag: dev}", ""}},
		baseEdit{"images-comment", "what builds each image in the project", "kustomization.yaml",
			setComment{yamlPath{"images"}, "csi-registrar:dev is what `make image` builds", imagesComment, true}},
	)
	return edits
}

// baseForbidden are texts no value or comment of the project's base may
// hold once edited (text -> why): they name csi-registrar's repository or
// its reference driver.
func baseForbidden() map[string]string {
	return map[string]string{
		"stub":        "the reference driver's names",
		"docs/":       "csi-registrar's documentation, not in the project",
		"overlays/":   "csi-registrar's overlays; the project's variants are manifests/in-process/ and without-rolling-update/",
		"components/": "csi-registrar's kustomize components",
		"examples/":   "csi-registrar's examples",
	}
}

// baseHeader is the comment on top of each file of the project's base.
func (o Options) baseHeader(name string, edits []string) string {
	version := o.Source.Version
	if o.Source.checkout() {
		version = "a checkout of it"
	}
	text := fmt.Sprintf("From %s/%s of %s (%s) with csi-driver-new's edits: %s. Yours to change.",
		baseDir, name, ModulePath, version, strings.Join(edits, ", "))
	var b strings.Builder
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 80 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n#\n")
	return b.String()
}

const daemonSetHead = `# One pod per node: the driver and the csi-registrar sidecar, which registers
# it with the kubelet (same args as upstream node-driver-registrar), in
# csi-registrar's rolling-update mode: an upgrade starts the new pod beside
# the old one on each node, the new pod registers on its own CSI socket, and
# the old pod leaves without the kubelet unregistering the driver. The lines
# marked "mode:" are what the mode changes; manifests/without-rolling-update/
# takes them out again (README.md, "The rolling-update mode").`

const csiDriverHead = `# How Kubernetes treats the driver's volumes: no attach step (a node-only
# driver), pod information passed on mount, and only CSI ephemeral (inline)
# volumes. With podInfoOnMount the kubelet passes volume_context
# csi.storage.k8s.io/ephemeral: "true", which the driver requires.
# volumeLifecycleModes and attachRequired are immutable: delete and re-create
# the object to change them.`

const kustomizationHead = `# The sidecar variant; in-process/ and without-rolling-update/ start from
# here. (kustomize refuses an overlay whose base is a directory above it,
# hence base/ next to them.)`

const imagesComment = `# The images are set here and nowhere else. [[.Binary]]:dev is what ` + "`make image`" + `
# builds; csi-registrar:dev what ` + "`make registrar-image`" + ` builds from a checkout
# (until a release publishes an image: then set its name and tag here).`
