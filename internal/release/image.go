package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// AnnotationRefName names an image in an OCI layout's index.json: the tag
// of `oci-archive:file:tag` (skopeo) and of containerd's import.
const AnnotationRefName = "org.opencontainers.image.ref.name"

// Image is the csi-registrar image for one platform: the root holds the
// binary as /csi-registrar and, as a symlink to it, /csi-node-driver-registrar
// (the name upstream's exec probes call; the binary picks the register role
// from it), as `make image` builds it from the Dockerfile.
type Image struct {
	// Arch is the GOARCH and OCI architecture: one of Archs.
	Arch string
	// Binary is the static linux/Arch csi-registrar.
	Binary []byte
}

// ImageOptions are what every platform's image shares.
type ImageOptions struct {
	// Version is the release version: the label org.opencontainers.image.version
	// and the tag (AnnotationRefName) of the index in the archive.
	Version string
	// Created is the image's creation time, also the files' modification
	// time: the same input gives the same bytes (e.g. the commit's time).
	Created time.Time
	// Revision is the source revision (a commit hash); empty: no label.
	Revision string
}

// Labels are the image's labels: those of the Dockerfile, plus the source
// and revision.
func (o ImageOptions) Labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "csi-registrar",
		"org.opencontainers.image.description": "Kubelet plugin registrar for CSI drivers (drop-in for node-driver-registrar) and a reference CSI node driver",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://github.com/csi-registrar/csi-registrar",
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

// platformOf is the OCI platform of a GOARCH of the release.
func platformOf(arch string) (v1.Platform, error) {
	p, err := PlatformOf(arch)
	if err != nil {
		return v1.Platform{}, err
	}
	return v1.Platform{Architecture: p.GOARCH, OS: "linux", Variant: p.Variant}, nil
}

// WriteOCIArchive writes one multi-platform image, an image index holding
// one image per element of images, as an OCI archive: a tar of an OCI image
// layout (oci-layout, index.json, blobs/sha256/) whose index.json lists the
// image index, tagged opts.Version. The same input gives the same bytes. It
// returns the image index's descriptor: its digest is the image's digest in
// a registry after a push that keeps digests (skopeo copy --all, crane push).
//
// go-containerregistry builds the images, the index and the layout; only
// the layer's files and the archive's tar are written here.
func WriteOCIArchive(w io.Writer, opts ImageOptions, images []Image) (v1.Descriptor, error) {
	if opts.Version == "" || opts.Created.IsZero() {
		return v1.Descriptor{}, fmt.Errorf("image options %+v: Version and Created are required", opts)
	}
	if len(images) == 0 {
		return v1.Descriptor{}, fmt.Errorf("no image to write")
	}
	created := opts.Created.UTC().Truncate(time.Second)
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, img := range images {
		p, err := platformOf(img.Arch)
		if err != nil {
			return v1.Descriptor{}, err
		}
		if seen[img.Arch] {
			return v1.Descriptor{}, fmt.Errorf("architecture %s given twice", img.Arch)
		}
		seen[img.Arch] = true
		oi, err := platformImage(img.Binary, p, created, opts.Labels())
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("the linux/%s image: %w", img.Arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: oi, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.version": opts.Version,
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}).(v1.ImageIndex)
	desc, err := partial.Descriptor(idx)
	if err != nil {
		return v1.Descriptor{}, err
	}
	dir, err := os.MkdirTemp("", "csi-registrar-oci-")
	if err != nil {
		return v1.Descriptor{}, err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: opts.Version})); err != nil {
		return v1.Descriptor{}, err
	}
	if err := tarLayout(w, dir, created); err != nil {
		return v1.Descriptor{}, err
	}
	return *desc, nil
}

// platformImage is the image of one platform: one layer (rootLayer), run as
// uid 0 (the kubelet's plugins_registry is root-owned 0750; the manifests
// drop every capability) with the registrar as its entrypoint.
func platformImage(binary []byte, p v1.Platform, created time.Time, labels map[string]string) (v1.Image, error) {
	raw, err := rootLayer(binary, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: created},
		CreatedBy: "make release",
		Comment:   "/csi-registrar and the symlink /csi-node-driver-registrar",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.Architecture, cf.OS, cf.Variant = p.Architecture, p.OS, p.Variant
	cf.Config.User = "0:0"
	cf.Config.Entrypoint = []string{"/csi-registrar", "register"}
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}

// rootLayer is the uncompressed tar of the image's root: the binary and
// the symlink, with mtime as every file's time.
func rootLayer(binary []byte, mtime time.Time) ([]byte, error) {
	if len(binary) == 0 {
		return nil, fmt.Errorf("empty binary")
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: "csi-registrar", Mode: 0o755, Size: int64(len(binary)),
		ModTime: mtime, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeSymlink, Name: "csi-node-driver-registrar", Linkname: "csi-registrar", Mode: 0o777,
		ModTime: mtime, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	err := tw.Close()
	return raw.Bytes(), err
}

// tarLayout writes the OCI image layout in dir as a tar: oci-layout,
// index.json, then the blobs in digest order, every entry with mtime (the
// same layout gives the same bytes).
func tarLayout(w io.Writer, dir string, mtime time.Time) error {
	tw := tar.NewWriter(w)
	file := func(name string) error {
		content, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: mtime, Format: tar.FormatPAX,
		}); err != nil {
			return err
		}
		_, err = tw.Write(content)
		return err
	}
	dirEntry := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
	}
	if err := file("oci-layout"); err != nil {
		return err
	}
	if err := file("index.json"); err != nil {
		return err
	}
	if err := dirEntry("blobs/"); err != nil {
		return err
	}
	if err := dirEntry("blobs/sha256/"); err != nil {
		return err
	}
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return err
	}
	for _, b := range blobs { // ReadDir sorts by name: digest order
		if err := file("blobs/sha256/" + b.Name()); err != nil {
			return err
		}
	}
	return tw.Close()
}
