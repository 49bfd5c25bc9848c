// Package newdriver writes a new CSI node driver project from the reference
// driver (stubdriver): its Go files, renamed into the author's module and
// package, plus a main package, tests, an image build, manifests, a Makefile,
// a README and a CI workflow. cmd/csi-driver-new is its command line.
//
// The reference driver stays the single source of the driver's code: the Go
// files are read from the csi-registrar module (a checkout, or the module
// cache for a released version) and renamed mechanically when the project is
// generated. Only the files that stubdriver has no counterpart of (main.go,
// the Makefile, manifests, ...) are templates, embedded in this package.
package newdriver

import (
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Options say what to generate and where.
type Options struct {
	// Module is the new project's Go module path, e.g. example.com/mydriver.
	Module string
	// Driver is the CSI driver name, e.g. my.csi.example.com.
	Driver string
	// Dir is where the project is written: it must not exist or be empty.
	Dir string
	// Package is the Go package name of the driver; default: from the last
	// element of Module (letters and digits only, lower-cased).
	Package string
	// KubeletDir is the kubelet's root directory the manifests use; default
	// csiplugin.DefaultKubeletDir. The driver's socket paths under it must
	// fit a unix socket address.
	KubeletDir string
	// Source is the csi-registrar module the project is generated from.
	Source Source
}

// Binary is the name of the project's command, image, namespace and
// DaemonSet: the last element of the module path without a major version
// suffix, lower-cased, with '.', '_' and '~' turned into '-' (a DNS label).
func (o Options) Binary() string {
	prefix, _, _ := module.SplitPathVersion(o.Module)
	var b strings.Builder
	for _, r := range strings.ToLower(path.Base(prefix)) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '_' || r == '~':
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > maxBinaryLength {
		name = strings.TrimRight(name[:maxBinaryLength], "-")
	}
	return name
}

// maxBinaryLength leaves room in a 63-character DNS label for the suffixes
// the manifests add ("-node").
const maxBinaryLength = 50

// packageName is o.Package, or the one derived from the module path: its
// letters and digits.
func (o Options) packageName() string {
	if o.Package != "" {
		return o.Package
	}
	name := strings.ReplaceAll(o.Binary(), "-", "")
	if name != "" && name[0] >= '0' && name[0] <= '9' {
		name = "driver" + name
	}
	return name
}

// validatePackage checks the Go package name (collisions with the names the
// driver's files use are checked once they are read, see checkPackageName).
func (o Options) validatePackage() error {
	if o.Binary() == "" {
		return bad("module path (-module, MODULE=)", o.Module, "its last element has no letter or digit to name the command after",
			"end the module path with a name such as mydriver")
	}
	pkg := o.packageName()
	const fix = "give a package name with -package (PACKAGE=), e.g. mydriver"
	switch {
	case token.IsKeyword(pkg) || pkg == "main" || types.Universe.Lookup(pkg) != nil:
		return bad("Go package name (-package, PACKAGE=)", pkg, "is a Go keyword, predeclared identifier or main", fix)
	case !token.IsIdentifier(pkg) || pkg != strings.ToLower(pkg) || strings.Contains(pkg, "_"):
		return bad("Go package name (-package, PACKAGE=)", pkg, "must be lower-case letters and digits, starting with a letter", fix)
	}
	return nil
}

func (o Options) kubeletDir() string {
	if o.KubeletDir == "" {
		return csiplugin.DefaultKubeletDir
	}
	return filepath.Clean(o.KubeletDir)
}

// socketPaths are the driver's sockets on the host, as the manifests put
// them: the CSI socket the kubelet dials and the registration socket.
func (o Options) socketPaths() (csiSocket, regDir string) {
	root := o.kubeletDir()
	return filepath.Join(root, "plugins", o.Driver, "csi.sock"), filepath.Join(root, csiplugin.PluginsRegistryDir)
}

// bad is the error for an input value that breaks a rule.
func bad(what, value, rule, fix string) error {
	return &csiplugin.ValidationError{What: what, Value: value, Rule: rule, Fix: fix}
}

// validate checks every input before anything is written. Errors are
// *csiplugin.ValidationError: the value, the rule and the fix.
func (o Options) validate() error {
	if err := csiplugin.ValidateDriverName(o.Driver); err != nil {
		return bad("driver name (-driver, DRIVER=)", o.Driver, err.(*csiplugin.ValidationError).Rule,
			"use a DNS-style name you own, e.g. my.csi.example.com")
	}
	if err := module.CheckPath(o.Module); err != nil {
		return bad("module path (-module, MODULE=)", o.Module, strings.TrimPrefix(err.Error(), fmt.Sprintf("malformed module path %q: ", o.Module)),
			"use the path the repository will be fetched by, e.g. github.com/you/mydriver or example.com/mydriver")
	}
	if err := o.validateSockets(); err != nil {
		return err
	}
	if err := o.validatePackage(); err != nil {
		return err
	}
	return validateDir(o.Dir)
}

// validateSockets checks that every socket the generated manifests name
// fits a unix socket address (csiplugin.MaxSocketPathLength bytes) under the
// kubelet directory: the rolling-update mode's (manifests/, in-process/) and
// the shared csi.sock of manifests/without-rolling-update/.
//
// The rule for long driver names: the CSI socket per pod,
// <kubelet-dir>/plugins/<driver>/<pod UID>.sock, is the longest, 33 bytes
// longer than csi.sock (a UID is 36 bytes). Under /var/lib/kubelet it
// fits a driver name of up to 40 bytes; each byte the kubelet directory is
// longer takes one from the name. The announcement sockets shorten long
// names themselves (csiplugin.RollingUpdatePrefix).
func (o Options) validateSockets() error {
	if !filepath.IsAbs(o.kubeletDir()) {
		return bad("kubelet directory (-kubelet-dir)", o.KubeletDir, "must be an absolute path", "e.g. "+csiplugin.DefaultKubeletDir)
	}
	for _, s := range o.hostSockets() {
		over := len(s.path) - csiplugin.MaxSocketPathLength
		if over <= 0 {
			continue
		}
		fix := fmt.Sprintf("choose a driver name at least %d bytes shorter, or a shorter kubelet directory", over)
		if s.perPod {
			fix = fmt.Sprintf("choose a driver name of at most %d bytes (this one is %d): under %s the CSI socket per pod "+
				"of the rolling-update mode, 33 bytes longer than csi.sock, fits no longer name; or a shorter kubelet directory",
				len(o.Driver)-over, len(o.Driver), o.kubeletDir())
		}
		return bad("driver name (-driver, DRIVER=)", o.Driver,
			fmt.Sprintf("its %s %s is %d bytes long, a unix socket path holds at most %d",
				s.what, s.path, len(s.path), csiplugin.MaxSocketPathLength), fix)
	}
	return nil
}

// podUIDPlaceholder stands for a pod's UID in a socket path: a UID is 36
// bytes (8-4-4-4-12 hex digits).
const podUIDPlaceholder = "00000000-0000-0000-0000-000000000000"

// maxAnnouncementVersion is the longest version an announcement socket's
// name carries (13 digits), as csi-registrar's registrar allows for.
const maxAnnouncementVersion = 9_999_999_999_999

type hostSocket struct {
	what, path string
	perPod     bool // named by the pod's UID
}

// hostSockets are the sockets on the host the generated manifests name, each
// at its longest, the longest first.
func (o Options) hostSockets() []hostSocket {
	csiSocket, regDir := o.socketPaths()
	sockDir := filepath.Dir(csiSocket)
	return []hostSocket{
		{"CSI socket per pod (rolling-update mode)", filepath.Join(sockDir, podUIDPlaceholder+".sock"), true},
		{"announcement socket (rolling-update mode)", filepath.Join(regDir,
			csiplugin.RollingUpdateSocketName(o.Driver, strings.Repeat("f", csiplugin.InstanceIDLength), maxAnnouncementVersion)), false},
		{"registration socket", filepath.Join(regDir, o.Driver+csiplugin.RegistrationSocketSuffix), false},
		{"CSI socket (without-rolling-update/)", csiSocket, false},
	}
}

// validateDir checks that dir is given and is absent or an empty directory.
func validateDir(dir string) error {
	const fix = "name a new or empty directory, e.g. DIR=../mydriver"
	if dir == "" {
		return bad("directory (-dir, DIR=)", dir, "must not be empty", fix)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return bad("directory (-dir, DIR=)", dir, "is a file, not a directory", fix)
		}
		return bad("directory (-dir, DIR=)", dir, "cannot be read: "+err.Error(), fix)
	case len(entries) > 0:
		names := make([]string, 0, 3)
		for _, e := range entries[:min(3, len(entries))] {
			names = append(names, e.Name())
		}
		return bad("directory (-dir, DIR=)", dir,
			fmt.Sprintf("must be empty or not exist; it holds %d entries (%s…)", len(entries), strings.Join(names, ", ")),
			"nothing is overwritten: "+fix)
	}
	return nil
}
