package newdriver

import (
	"bytes"
	"embed"
	"fmt"
	"path/filepath"
	"text/template"
)

//go:embed templates
var templateFS embed.FS // read-only: embed.FS cannot change

// templateData is what the templates are rendered with.
type templateData struct {
	Module, Driver, Package, Binary string
	KubeletDir                      string // the kubelet's root directory
	SocketDir, CSISocket, RegDir    string // the driver's socket directory and socket, plugins_registry
	Replace                         bool   // go.mod replaces csi-registrar with the copy in ThirdParty
	ThirdParty                      string // the copy's directory, relative to the project
	Checkout                        string // the default of the Makefile's CSI_REGISTRAR: relative, never the generator's checkout
	Version                         string // the csi-registrar version required
	Ref, RefComment                 string // the csi-registrar ref CI checks out, and why
}

func (o Options) templateData() templateData {
	csiSocket, regDir := o.socketPaths()
	d := templateData{
		Module: o.Module, Driver: o.Driver, Package: o.packageName(), Binary: o.Binary(),
		KubeletDir: o.kubeletDir(), SocketDir: filepath.Dir(csiSocket), CSISocket: csiSocket, RegDir: regDir,
		Replace: o.Source.checkout(), ThirdParty: thirdPartyDir, Checkout: "../csi-registrar", Version: o.Source.requiredVersion(),
		Ref: o.Source.Version, RefComment: "the version go.mod requires",
	}
	return d
}

// templateFiles maps each template to the project file it renders (the Go
// ones are renamed with the reference driver's files afterwards).
// manifests/base/ is not a template: it is csi-registrar's, edited
// (baseedits.go).
func (o Options) templateFiles() []struct{ tmpl, path string } {
	bin := o.Binary()
	return []struct{ tmpl, path string }{
		{"main.go.tmpl", "cmd/" + bin + "/main.go"},
		{"main_test.go.tmpl", "cmd/" + bin + "/main_test.go"},
		{"Makefile.tmpl", "Makefile"},
		{"Dockerfile.tmpl", "Dockerfile"},
		{"dockerignore.tmpl", ".dockerignore"},
		{"gitignore.tmpl", ".gitignore"},
		{"README.md.tmpl", "README.md"},
		{"ci.yaml.tmpl", ".github/workflows/ci.yaml"},
		{"manifests/kustomization.yaml.tmpl", "manifests/kustomization.yaml"},
		{"manifests/in-process-kustomization.yaml.tmpl", "manifests/in-process/kustomization.yaml"},
		{"manifests/in-process-daemonset-patch.yaml.tmpl", "manifests/in-process/daemonset-patch.yaml"},
		{"manifests/in-process-register-args.yaml.tmpl", "manifests/in-process/register-args.yaml"},
		{"manifests/without-rolling-update-kustomization.yaml.tmpl", "manifests/without-rolling-update/kustomization.yaml"},
		{"manifests/without-rolling-update-patch.yaml.tmpl", "manifests/without-rolling-update/patch.yaml"},
	}
}

// render renders every template. The delimiters are [[ ]]: Makefiles and
// GitHub workflows use {{ }} and ${{ }} themselves.
func (o Options) render() ([]file, error) {
	data := o.templateData()
	var out []file
	for _, tf := range o.templateFiles() {
		t, err := template.New(tf.tmpl).Delims("[[", "]]").Option("missingkey=error").ParseFS(templateFS, "templates/"+tf.tmpl)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, filepath.Base(tf.tmpl), data); err != nil {
			return nil, fmt.Errorf("render %s: %w", tf.tmpl, err)
		}
		out = append(out, file{path: tf.path, data: b.Bytes(), mode: 0o644})
	}
	return out, nil
}
