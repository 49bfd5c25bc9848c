package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// The kubectl plugin as krew installs it: `kubectl krew install
// --manifest=KrewManifestName(version)` downloads the archive of the
// machine's platform, checks its SHA-256 and links PluginBin onto PATH, so
// that kubectl runs it as `kubectl csi-registrar`.
const (
	// KrewPluginName is the plugin's name in a krew manifest (and index).
	KrewPluginName = "csi-registrar"
	// PluginBin is the kubectl plugin's file name in its archive and on PATH.
	PluginBin = "kubectl-csi_registrar"
	// LicenseFile is the license's file name in the repository and in the
	// plugin's archive.
	LicenseFile = "LICENSE"
	// KrewAPIVersion is the apiVersion of krew's plugin manifest.
	KrewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	// Homepage is the project's home page, named in the krew manifest.
	Homepage = "https://github.com/csi-registrar/csi-registrar"
)

// PluginArchiveName is the file name of the kubectl plugin's archive for
// arch: a gzip'd tar of PluginBin and LicenseFile, what krew downloads.
func PluginArchiveName(version, arch string) string {
	return PluginBinaryName(version, arch) + ".tar.gz"
}

// KrewManifestName is the file name of the krew plugin manifest.
func KrewManifestName(version string) string { return PluginBin + "-" + version + ".krew.yaml" }

// DefaultDownloadURL is where a release's files are downloaded from: the
// GitHub release of version. The krew manifest's URIs start with it.
func DefaultDownloadURL(version string) string {
	return Homepage + "/releases/download/" + version + "/"
}

// KrewManifest is krew's plugin manifest (kind Plugin), the fields
// csi-registrar's uses.
type KrewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec KrewSpec `json:"spec"`
}

// KrewSpec is the spec of a krew plugin manifest.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one platform's archive: krew picks the one whose selector
// matches the machine's os and arch labels.
type KrewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Bin    string     `json:"bin"`
	Files  []KrewFile `json:"files"`
}

// KrewFile is a file krew copies out of the archive into the plugin's
// installation directory.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// krewDescription is the manifest's description: what the plugin does,
// and what it needs.
const krewDescription = `For every CSI driver and every node, tells whether the kubelet has the
driver registered (its CSINode entry and the Node annotation
csi.volume.kubernetes.io/nodeid agree, and a node plugin pod runs there),
and why not: the pod's state, the registrar's /readyz stage or the
kubelet's error. Works for csi-registrar, node-driver-registrar and
drivers that register in-process. Exit 0 when every expected node has
every driver registered, 1 when not. Needs list and watch on nodes, pods,
daemonsets, csidrivers and csinodes (the ClusterRole csi-registrar-status).
`

// writeKrew writes, into dir, the kubectl plugin's archive for every arch
// of Archs (from its binary there and the license) and the krew manifest
// naming them under downloadURL with their SHA-256.
func writeKrew(dir, version, downloadURL string, license []byte, modTime time.Time) error {
	m := KrewManifest{APIVersion: KrewAPIVersion, Kind: "Plugin"}
	m.Metadata.Name = KrewPluginName
	m.Spec = KrewSpec{Version: version, Homepage: Homepage, Description: krewDescription,
		ShortDescription: "Tell whether kubelets have CSI drivers registered"}
	for _, arch := range Archs() {
		bin, err := os.ReadFile(filepath.Join(dir, PluginBinaryName(version, arch)))
		if err != nil {
			return fmt.Errorf("%w: the kubectl plugin's linux/%s binary: %v (make release builds it first)", ErrBadInput, arch, err)
		}
		name := PluginArchiveName(version, arch)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		h := sha256.New()
		err = WritePluginArchive(io.MultiWriter(f, h), bin, license, modTime)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		p := KrewPlatform{URI: downloadURL + name, SHA256: hex.EncodeToString(h.Sum(nil)), Bin: PluginBin,
			Files: []KrewFile{{From: PluginBin, To: "."}, {From: LicenseFile, To: "."}}}
		p.Selector.MatchLabels = map[string]string{"os": "linux", "arch": arch}
		m.Spec.Platforms = append(m.Spec.Platforms, p)
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, KrewManifestName(version)), b, 0o644)
}

// WritePluginArchive writes a gzip'd tar of the kubectl plugin's binary
// (as PluginBin, mode 0755) and the license (LicenseFile, 0644), both
// dated modTime and owned by 0:0: the same input gives the same bytes.
func WritePluginArchive(w io.Writer, bin, license []byte, modTime time.Time) error {
	zw := gzip.NewWriter(w) // no name, no time in the header
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name    string
		mode    int64
		content []byte
	}{{PluginBin, 0o755, bin}, {LicenseFile, 0o644, license}} {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.content)),
			ModTime: modTime.UTC().Truncate(time.Second), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.content); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
